"""Nova's servers, whose volumes a drain of a Cinder backend moves:
which path each volume takes (``paths``), Nova's API and nova-manage
(``compute``), and the move of a stopped server's volume (``offline``).
"""
