"""MXNet's native data iterators (`mx.io.ImageRecordIter`, `CSVIter`, `LibSVMIter`,
`MNISTIter`, ...), written in Python over numpy, OpenCV and simplejpeg; `mx.io` exposes them."""
from .record import ImageRecordIter, ImageRecordInt8Iter, ImageRecordUInt8Iter  # noqa: F401
from .detection_record import ImageDetRecordIter  # noqa: F401
from .text import CSVIter, LibSVMIter, MNISTIter  # noqa: F401

__all__ = ["ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordInt8Iter", "ImageDetRecordIter", "CSVIter",
           "LibSVMIter", "MNISTIter"]
