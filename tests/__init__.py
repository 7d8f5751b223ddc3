# oslo.service picks its backend when first imported; tests run on
# native threads, like the services by default.
from volmig import concurrency

concurrency.init_threading()
