"""Gradient accumulation on the canonical tree (numerics.md §18, contract T5): bitgrad.accumulate
and bitgrad.Accumulator.

A micro-batch's gradient is that of S_j / divisor (S_j its loss summed over its samples, divisor
the whole batch's samples times the values per sample: what a mean over the whole batch divides
by); the micro-batches' gradients and loss sums are combined by the pairwise tree over j, as the
training step combines them. When every micro-batch but the last holds the same power-of-two
number of 32-sample blocks (and the last no more), each is a complete subtree of the batch's
reductions and the result has the bits of the whole batch in one forward and backward.

`p.grad += g` in a loop is a sequential sum ((g0 + g1) + g2) + g3: another order than the
batch's, so other bits in general (docs/python.md, "Gradient accumulation").
"""
from . import _bitgrad as _b

Tensor = _b.Tensor


def _named_param_list(params, what):
    """(name, tensor) of a module (its named_parameters), of (name, tensor) pairs or of tensors
    (named by position) that require grad (a frozen parameter takes no part, as in the optimizer)."""
    if isinstance(params, Tensor):
        return [("0", params)] if params.requires_grad else []
    if hasattr(params, "named_parameters"):
        return [(n, t) for n, t in params.named_parameters() if t.requires_grad]
    out = []
    for i, p in enumerate(params):
        if isinstance(p, Tensor):
            out.append((str(i), p))
        elif isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[1], Tensor):
            out.append((str(p[0]), p[1]))
        else:
            raise TypeError("%s: expected a module, (name, tensor) pairs or tensors, got an element of type %s"
                            % (what, type(p).__name__))
    return [(n, t) for n, t in out if t.requires_grad]


def _param_list(params, what):
    return [t for _, t in _named_param_list(params, what)]


def _name_parameter(text, names):
    """The combine's "parameter 3 [shape]" with the parameter's name instead of its index."""
    import re
    m = re.match(r"parameter (\d+) ", text)
    if m and int(m.group(1)) < len(names):
        return "parameter '%s' " % names[int(m.group(1))] + text[m.end():]
    return text


def _modules(model):
    """The module and every module under it."""
    if hasattr(model, "modules"):
        return list(model.modules())
    out, todo = [], [model]
    while todo:
        m = todo.pop()
        out.append(m)
        children = m.children() if hasattr(m, "children") else []
        todo.extend(c[1] if isinstance(c, tuple) else c for c in children)
    return out


def _batch_statistics(m):
    """Whether module m normalises by the statistics of the rows it sees: a batch-norm layer in
    training mode, or an imported ONNX graph running BatchNormalization with training semantics."""
    if not getattr(m, "training", False):
        return False  # evaluation: the running statistics, the same for any split
    bn = getattr(_b.nn, "_BatchNorm", None)
    if bn is not None and isinstance(m, bn):
        return True
    graph = getattr(getattr(_b, "onnx", None), "GraphModule", None)
    return graph is not None and isinstance(m, graph) and m.training_semantics and m.runs_op("BatchNormalization")


def _refuse_batch_norm(model, why):
    """Batch norm normalises by the statistics of the rows it sees: a micro-batch's or a rank's
    are not the batch's, so the bits could not be the whole batch's (as `bitgrad train` refuses)."""
    if isinstance(model, Tensor) or not hasattr(model, "parameters"):
        return
    if any(_batch_statistics(m) for m in _modules(model)):
        raise _b.InputError("%s with a batch-norm layer is not supported in training mode (nor an ONNX graph's "
                            "BatchNormalization): its statistics would be those of each part, not of the whole batch "
                            "(contracts T5, T6); use one piece, or eval() to use the running statistics" % why)


def _graphs(model):
    """The imported ONNX graphs of a module (the module itself first)."""
    graph = getattr(getattr(_b, "onnx", None), "GraphModule", None)
    if graph is None or isinstance(model, Tensor) or not hasattr(model, "parameters"):
        return []
    return [m for m in _modules(model) if isinstance(m, graph)]


def _sample_mode(model, x, why, pieces):
    """Where the samples of the model's imported graphs go (numerics.md §42): 'batch_rule' (each
    gradient sums them by the batch rule on axis 0), 'per_block' (kept apart, but the batch's bits
    need every 32-sample block as its own forward and backward); a graph that mixes samples (or
    takes batch statistics per block) raises when the batch runs in several pieces."""
    mode = "batch_rule"
    for g in _graphs(model):
        shape = None  # the graph's latest forward's input, or its declared one
        if g is model and x is not None and x.ndim > 0:
            fixed = g.input_shape(0)[0] if g.input_shape(0) else None  # a batch the file fixes: the probe runs at it
            shape = [fixed if isinstance(fixed, int) and fixed > 1 else 3] + list(x.shape[1:])
        a = g.samples(shape)
        whole = a["mode"] == "mixes_samples" or (a["mode"] == "per_block" and a["batch_statistics"] and getattr(g, "training", True))
        if whole and pieces:
            what = ("mixes the samples: " if a["mode"] == "mixes_samples" else "keeps the samples apart only per 32-sample block, with "
                    "batch statistics: ") + a["why"]
            raise _b.InputError("%s cannot give the whole batch's bits: %s %s (contracts T5, T6; numerics.md §42); run the batch as one "
                                "piece" % (why, a["node"], what))
        if a["mode"] == "per_block" and not whole:
            mode = "per_block"
    return mode


def _split(mb, what):
    """(x, y) of a micro-batch: a bitgrad.data.Batch or an (x, y) pair of tensors."""
    if isinstance(mb, _b.data.Batch):
        return mb.x, mb.y
    if isinstance(mb, (tuple, list)) and len(mb) == 2 and isinstance(mb[0], Tensor):
        return mb[0], mb[1]
    raise TypeError("%s: a micro-batch is an (x, y) pair of tensors or a bitgrad.data.Batch, got %s" % (what, type(mb).__name__))


def _per_sample(y):
    """The values per sample a mean over the batch divides by: 1 for class labels [N], T for
    labels [N, T], D for targets [N, D] (y's elements per row)."""
    if not isinstance(y, Tensor) or y.ndim == 0:
        return 1
    n = 1
    for d in y.shape[1:]:
        n *= d
    return n


class Accumulator:
    """Accumulator(params, divisor, *, strict=False)

    Gradient accumulation on the canonical tree. `params`: a module, (name, tensor) pairs or
    tensors; `divisor`: what a mean over the whole batch divides by (its samples, times the
    values per sample for targets of several values). For each micro-batch, in order:
    `acc.backward(loss_sum, rows)` with its loss summed over its `rows` samples (reduction="sum",
    its forward at row offset `acc.row_offset` for dropout); then `acc.finish()` leaves the
    batch's gradient in .grad and returns the batch's loss (S / divisor, 0-d).

    The parameters must hold no gradient when the first micro-batch starts (zero_grad first).
    With micro-batches of one power-of-two number of 32-sample blocks (the last may be shorter)
    the bits are those of the whole batch (`whole_batch` says so after finish); otherwise those of
    the tree over micro-batches (as `bitgrad train --accumulate`), or an error with strict=True.
    """

    def __init__(self, params, divisor, *, strict=False):
        if not divisor or divisor <= 0:
            raise _b.InputError("Accumulator: divisor is %r; expected the whole batch's samples (times the values per "
                                "sample), what a mean over the batch divides by" % (divisor,))
        named = _named_param_list(params, "Accumulator")
        self.params = [t for _, t in named]
        self._names = [n for n, _ in named]
        self._model = params if hasattr(params, "parameters") and not isinstance(params, Tensor) else None
        self.divisor = divisor
        self.strict = strict
        self.whole_batch = None
        self._comb = _b.distributed.GradientCombiner(self.params)
        self._sizes = []

    @property
    def per_block(self):
        """Set by accumulate() when it runs each 32-sample block of an imported graph as its own piece
        (numerics.md §42): a piece's uses of a parameter are then added before the tree."""
        return self._comb.per_block

    @per_block.setter
    def per_block(self, on):
        self._comb.per_block = bool(on)

    @property
    def row_offset(self):
        """The row, within the whole batch, of the next micro-batch's first sample."""
        return sum(self._sizes)

    @property
    def micro_batches(self):
        return len(self._sizes)

    def backward(self, loss_sum, rows):
        """Backward of loss_sum / divisor for a micro-batch of `rows` samples; takes its gradients."""
        if not isinstance(rows, int) or isinstance(rows, bool) or rows <= 0:
            raise _b.InputError("Accumulator.backward: rows is %r; expected the micro-batch's samples (an int > 0)" % (rows,))
        if len(self._sizes) == 1 and self._model is not None:
            _refuse_batch_norm(self._model, "Accumulator: a second micro-batch")
            _sample_mode(self._model, None, "Accumulator: a second micro-batch", True)
        self._comb.backward(loss_sum, float(self.divisor), rows)  # its sums over samples checked against rows
        self._sizes.append(rows)

    def finish(self):
        """Combines the micro-batches by the tree; .grad holds the batch's gradient. Returns the loss."""
        if not self._sizes:
            raise _b.InputError("Accumulator.finish: no micro-batch was added")
        plan = _b.distributed.plan_micro_batches(self._sizes)
        whole, mismatch = plan.whole_batch, ""
        if self._model is not None and not self.per_block:
            # an imported graph that mixes its samples is refused; one kept apart per 32-sample
            # block runs its blocks apart itself (numerics §42), so its micro-batches need no more
            _sample_mode(self._model, None, "Accumulator", len(self._sizes) > 1)
        if whole and not self.per_block and len(self._sizes) > 1 and self._comb.sample_mismatch:
            # what the backward ran: a sum over samples off the batch rule, or a use of a parameter
            # that is not one such sum (numerics §10, "Uses")
            whole, mismatch = False, _name_parameter(self._comb.sample_mismatch, self._names)
        if self.strict and not whole:
            self._comb.reset()
            sizes, self._sizes = self._sizes, []
            shown = sizes if len(sizes) <= 8 else "%s, ..." % sizes[:8]
            if mismatch:
                hint = ("use the parameter itself in the op that sums over the samples (an op between them, such as w * 0.3, "
                        "acts on each micro-batch's sum rather than the batch's)" if "received a gradient" in mismatch else
                        "keep the samples on axis 0 where they meet the parameters (run the layers batch-first)")
                raise _b.InputError(
                    "accumulate: the micro-batches' gradients are not the whole batch's: %s (contract T5, numerics.md §10, §42); "
                    "%s, or strict=False for the tree over micro-batches" % (mismatch, hint))
            raise _b.InputError(
                "accumulate: micro-batches of %s samples are not each a power-of-two number of 32-sample blocks (the last "
                "one no longer), so their tree is not the whole batch's (contract T5); use such sizes, or strict=False for "
                "the tree over micro-batches" % (shown,))
        self._comb.end_node()
        total = self._comb.finish(plan)
        self.whole_batch = whole
        self._sizes = []
        with _b.no_grad():
            return _b.div(total, float(self.divisor))


def accumulate(params, micro_batches, loss_fn, *, divisor=None, strict=False):
    """The batch's gradient from its micro-batches, combined on the canonical tree (contract T5).

    params: a module, (name, tensor) pairs or tensors (holding no gradient: zero_grad first).
    micro_batches: (x, y) pairs or bitgrad.data.Batch objects, in the batch's order.
    loss_fn(x, y, row_offset): the micro-batch's loss SUMMED over its samples (reduction="sum");
    row_offset is its first row within the whole batch (nn.Context(row_offset=...) keys dropout).
    divisor: what a mean over the whole batch divides by; default its samples times the values
    per sample of y (1 for class labels).

    Leaves the gradient in .grad and returns the batch's loss (the sum over divisor, 0-d). With
    micro-batches of one power-of-two number of 32-sample blocks (the last may be shorter), the
    bits are those of `loss_fn(X, Y, 0) / divisor` over the whole batch, backward; otherwise those
    of the tree over micro-batches (strict=True refuses instead).
    """
    mbs = [_split(mb, "accumulate") for mb in micro_batches]
    if not mbs:
        raise _b.InputError("accumulate: no micro-batches")
    if len(mbs) > 1:
        _refuse_batch_norm(params, "accumulate: %d micro-batches" % len(mbs))
    rows = [x.shape[0] if x.ndim > 0 else 0 for x, _ in mbs]
    if divisor is None:
        divisor = sum(rows) * _per_sample(mbs[0][1])
    # an imported graph that keeps its samples apart without the batch rule on axis 0 runs every
    # 32-sample block as its own piece, as `bitgrad train` does (numerics.md §42), when the
    # micro-batches are whole subtrees of the batch's blocks
    blocks = _sample_mode(params, mbs[0][0], "accumulate: %d micro-batches" % len(mbs), len(mbs) > 1) == "per_block" \
        and min(rows) > 0 and _b.distributed.plan_micro_batches(rows).whole_batch
    acc = Accumulator(params, divisor, strict=strict)
    acc.per_block = blocks
    for (x, y), r in zip(mbs, rows):
        if not blocks or r <= 32:
            acc.backward(loss_fn(x, y, acc.row_offset), r)
            continue
        for k in range(0, r, 32):
            e = min(r, k + 32)
            acc.backward(loss_fn(x[k:e], y[k:e], acc.row_offset), e - k)
    return acc.finish()
