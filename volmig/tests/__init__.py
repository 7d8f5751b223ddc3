# oslo.service picks its backend when first imported; tests run on
# native threads, like the services by default.
from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)
