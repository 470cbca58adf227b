"""symjit.image (`mx.image`, also `mx.img`): decoding, resizing, cropping and augmenting images,
and the ImageIter data iterator, as MXNet 1.9.1's `mxnet.image`."""
from .image import *  # noqa: F401,F403
from .detection import *  # noqa: F401,F403
