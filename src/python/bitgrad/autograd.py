"""PyTorch's torch.autograd.Function: an op written in Python, forward and backward by hand.

    class Scale(bitgrad.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w
        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g * w, bitgrad.sum(g * x, 0)
    y = Scale.apply(x, w)

forward runs without recording (its ops keep no history) and returns one tensor; backward gets
the gradient of that output and returns one value per argument of forward (None for an argument
that takes none, as torch). backward runs inside bitgrad's backward, under its checks: where a
training step is split into micro-batches or ranks, a parameter's gradient from a Function is
the whole batch's only when backward computes it as one sum over the samples (a sum over axis 0,
or a 2-d product over them, such as g.T @ x); anything after that sum is reported
(whole_batch = False, numerics.md §10 "Uses"). Several outputs, create_graph and
mark_dirty are not supported and raise.
"""
from . import _bitgrad as _b

_Tensor = _b.Tensor


class FunctionCtx:
    """What forward leaves for backward: save_for_backward(*tensors) / saved_tensors,
    needs_input_grad (per argument of forward), and any attribute set on it."""

    def __init__(self, needs_input_grad):
        self._needs = tuple(needs_input_grad)
        self._saved = ()

    @property
    def needs_input_grad(self):
        """Per argument of forward: whether it is a tensor that requires grad."""
        return self._needs

    def save_for_backward(self, *tensors):
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, _Tensor):
                raise TypeError("save_for_backward: argument %d is a %s; expected bitgrad.Tensor or None" % (i, type(t).__name__))
        self._saved = tuple(tensors)

    @property
    def saved_tensors(self):
        return self._saved

    def mark_dirty(self, *tensors):
        raise NotImplementedError("bitgrad.autograd.Function: mark_dirty (an in-place forward) is not supported; return a new tensor")

    def mark_non_differentiable(self, *tensors):
        raise NotImplementedError("bitgrad.autograd.Function: mark_non_differentiable is not supported (one differentiable output)")

    def set_materialize_grads(self, value):
        if not value:
            raise NotImplementedError("bitgrad.autograd.Function: set_materialize_grads(False) is not supported: the output's "
                                      "gradient is always a tensor")


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, grad_output); call Cls.apply(*args)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a bitgrad.autograd.Function subclass defines forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a bitgrad.autograd.Function subclass defines backward(ctx, grad_output)")

    def __init__(self, *args, **kwargs):
        raise TypeError("%s: call %s.apply(...), not the class (as torch.autograd.Function)" % (type(self).__name__, type(self).__name__))

    @classmethod
    def apply(cls, *args, **kwargs):
        name = cls.__name__
        needs = tuple(isinstance(a, _Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with _b.no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not isinstance(out, _Tensor):
            raise TypeError("%s.forward returned a %s; bitgrad's Function returns one bitgrad.Tensor (several outputs are not "
                            "supported)" % (name, type(out).__name__))
        if not (_b.is_grad_enabled() and any(needs)):
            return out
        tensors = [i for i, a in enumerate(args) if isinstance(a, _Tensor)]

        def backward(g):
            grads = cls.backward(ctx, g)
            if not isinstance(grads, tuple):
                grads = (grads,)
            if len(grads) != len(args):
                raise TypeError("%s.backward returned %d value(s); forward took %d argument(s): return one per argument (None "
                                "where there is no gradient)" % (name, len(grads), len(args)))
            for i, gi in enumerate(grads):
                if gi is not None and not isinstance(args[i], _Tensor):
                    raise TypeError("%s.backward returned a gradient for argument %d, a %s, which is not a tensor"
                                    % (name, i, type(args[i]).__name__))
            return [grads[i] for i in tensors]

        return _b._custom_function(name, [args[i] for i in tensors], out, backward)
