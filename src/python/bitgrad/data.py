"""bitgrad.data: datasets and the deterministic worker loader.

A batch is a pure function of (dataset, seed, epoch, index): loader threads and workers only
decide who builds it. A Python dataset (any object with __len__ and __getitem__(i) -> (x, y))
is asked for each sample by its id, so its batches do not depend on timing either, as long as
dataset[i] depends on i alone.
"""
import numpy as _np

from . import _bitgrad as _b

globals().update({k: v for k, v in vars(_b.data).items() if not k.startswith("__")})


def _as_dataset(ds, num_classes=None):
    if isinstance(ds, _b.data.Dataset):
        return ds
    if not hasattr(ds, "__len__") or not hasattr(ds, "__getitem__"):
        raise TypeError("DataLoader: a dataset needs __len__ and __getitem__, got %s" % type(ds).__name__)
    if len(ds) == 0:
        raise _b.InputError("DataLoader: the dataset is empty")
    x, y = ds[0]
    sample_shape = tuple(_np.shape(x))
    classes = num_classes if num_classes is not None else getattr(ds, "num_classes", None)
    if isinstance(y, (int, _np.integer)) and not isinstance(y, bool):
        if not classes:
            raise _b.InputError("DataLoader: %s gives integer labels; say how many classes (num_classes=, or a num_classes "
                                "attribute)" % type(ds).__name__)
        return _b.data.from_python(ds, sample_shape, int(classes), ())
    y_arr = _np.asarray(y)
    if y_arr.dtype.kind in "iu":
        if not classes:
            raise _b.InputError("DataLoader: %s gives integer labels; say how many classes" % type(ds).__name__)
        return _b.data.from_python(ds, sample_shape, int(classes), tuple(y_arr.shape))
    return _b.data.from_python(ds, sample_shape, 0, tuple(y_arr.shape))


class DataLoader(_b.data.DataLoader):
    """DataLoader(dataset, batch_size=64, *, shuffle=True, drop_last=True, workers=0, prefetch=4,
    seed=0, crop_padding=0, hflip=False, num_classes=None)

    Iterating gives the batches from where the loader stands to the end of that epoch; next()
    goes on for ever (after an epoch's last batch comes the next epoch's first).
    """

    def __init__(self, dataset, batch_size=64, *, num_classes=None, **options):
        super().__init__(_as_dataset(dataset, num_classes), batch_size, **options)

    def __iter__(self):
        return _batches(self)


def _batches(loader):
    """The rest of the loader's epoch, batch by batch (DataLoader and data parallel's loader)."""
    last = len(loader) - 1
    while True:
        b = loader.next()
        yield b
        if b.index == last:
            return
