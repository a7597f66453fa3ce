# The step rate of a small PyTorch training, for the cost of recording it with bitgrad.torch:
# bench/torch_record.sh runs it plain and recorded, alternating. torch runs on THREADS intra-op
# threads (default 1).
#   mlp: 784-256-256-10, Adam, batches of 128 from a shuffling DataLoader
#   cnn: LeNet-5 on 1x28x28 (conv 6@5x5, pool, conv 16@5x5, pool, 120, 84, 10), Adam, batches of 64
#   python3 bench/torch_record_step.py mlp|cnn [STEPS]
# With PAIRED=S, run under `python3 -m bitgrad.torch.record`, the script itself switches the
# recording off and on every S steps and prints the median, over pairs of neighbouring
# segments, of recorded time / plain time: the host's slow swings (a shared machine) then
# touch both sides of a pair alike, which separate processes minutes apart do not.
# PAIRED=S HASH_ONLY=1, run plain, switches only the hashing a recording does at a step, with
# nothing else around it: the batch at the model's call, the gradients before the step, the
# parameters and Adam's state after it, each one bitgrad call on NumPy views made once (these
# tensors stay the same ones here). The floor under any recording that hashes every step.
# PAIRED=S HASH_ONLY=1 MINIMAL=1 adds the least that hooks on an unmodified script must do
# beside it: the batch hashed in a Module.__call__ wrapper, the loss's bits after backward(),
# torch's generator state read and hashed with the gradients (NumPy's and Python's as views
# made once), and one line of text around the digests filled and appended to a file in the
# call that hashes the parameters and state; no names, data order or bookkeeping.
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

model_name = sys.argv[1] if len(sys.argv) > 1 else "mlp"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 400
paired = int(os.environ.get("PAIRED", "0"))
torch.set_num_threads(int(os.environ.get("THREADS", "1")))
torch.manual_seed(0)
if model_name == "mlp":
    batch, X = 128, torch.randn(8192, 784)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
elif model_name == "cnn":
    batch, X = 64, torch.randn(4096, 1, 28, 28)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                torch.nn.Linear(400, 120), torch.nn.ReLU(), torch.nn.Linear(120, 84), torch.nn.ReLU(),
                                torch.nn.Linear(84, 10))
else:
    sys.exit("expected mlp or cnn, got %r" % model_name)
Y = torch.randint(0, 10, (X.shape[0],))
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=batch, shuffle=True)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)

switch = None
hashing = [False]
if paired and os.environ.get("HASH_ONLY"):
    from bitgrad import _bitgrad
    adam_step = opt.step
    views = []  # [the gradients' groups, the parameters' and state's groups, the gradients]

    def made_views():
        """False at the first hashed step (views made after it, with Adam's state there) and after
        zero_grad(set_to_none=True) gave new gradients; the step then goes unhashed."""
        params = [p for g in opt.param_groups for p in g["params"]]
        if views and all(p.grad is g for p, g in zip(params, views[2])):
            return True
        views[:] = [[[p.grad.numpy()] for p in params],
                    [[p.detach().numpy()] for p in params]
                    + [[v.numpy()] for p in params for v in opt.state[p].values() if isinstance(v, torch.Tensor)],
                    [p.grad for p in params]]
        return False

    def hashed_step(*args, **kwargs):
        if not hashing[0] or not made_views():
            return adam_step(*args, **kwargs)
        _bitgrad._fingerprints(views[0])
        out = adam_step(*args, **kwargs)
        _bitgrad._fingerprints(views[1])
        return out

    if os.environ.get("MINIMAL"):
        import struct
        import tempfile

        from bitgrad.torch import _rng

        generators = _rng.Generators()
        views_rng = [[generators._numpy_bytes(False)], generators._python()]
        trace = tempfile.TemporaryFile()
        written, loss_bits, templates = [0], [""], {}
        module_call, autograd_backward = torch.nn.Module.__call__, torch.autograd.backward

        def call(self, *args, **kwargs):
            if hashing[0] and self is model and views:
                _bitgrad._fingerprints([[args[0].detach().numpy()]])
            return module_call(self, *args, **kwargs)

        def backward(tensors, *args, **kwargs):
            out = autograd_backward(tensors, *args, **kwargs)
            if hashing[0]:
                loss_bits[0] = "0x%08x" % int.from_bytes(struct.pack("<f", tensors.item()), "little")
            return out

        torch.nn.Module.__call__, torch.autograd.backward = call, backward

        def minimal_step(*args, **kwargs):
            if not hashing[0] or not made_views():
                return adam_step(*args, **kwargs)
            pre = _bitgrad._fingerprints(views[0] + [[torch.get_rng_state().numpy()]] + views_rng)
            out = adam_step(*args, **kwargs)
            values = pre + views[1] + [loss_bits[0]]
            pieces = templates.get(len(values))
            if pieces is None:
                pieces = templates[len(values)] = tuple(['{"v": ["'] + ['", "'] * (len(values) - 1) + ['"]}'])
            written[0] += _bitgrad._hashed_line(pieces, values, trace.fileno(), written[0])
            return out

        opt.step = minimal_step
    else:
        opt.step = hashed_step

    def switch(on):
        hashing[0] = on
elif paired:
    from bitgrad.torch import _patches
    recorder = _patches.state.active
    if recorder is None:
        sys.exit("PAIRED needs the recording: python3 -m bitgrad.torch.record --out DIR -- %s" % " ".join(sys.argv))

    def switch(on):
        _patches.state.active = recorder if on else None

done, t0, marks = 0, None, []
while done < steps:
    for x, y in loader:
        if done == 20:
            t0 = time.perf_counter()
        if paired and done >= 20 and (done - 20) % paired == 0:
            marks.append(time.perf_counter())
            switch(((done - 20) // paired) % 2 == 0)  # recorded first, then plain
        opt.zero_grad()
        if hashing[0] and views and not os.environ.get("MINIMAL"):
            _bitgrad._fingerprints([[x.numpy()]])
        F.cross_entropy(model(x), y).backward()
        opt.step()
        done += 1
        if done == steps:
            break
end = time.perf_counter()
print("steps/s %.1f" % ((steps - 20) / (end - t0)))
if paired and os.environ.get("HASH_ONLY") and os.environ.get("MINIMAL"):
    print("minimal recording: %d bytes of records written" % written[0])
if paired:
    marks.append(end)
    seg = [b - a for a, b in zip(marks, marks[1:])]
    ratios = [seg[i] / seg[i + 1] for i in range(0, len(seg) - 1, 2)]
    print("paired recorded/plain %.4f over %d pairs of %d steps (quartiles %.4f %.4f)"
          % (statistics.median(ratios), len(ratios), paired, *statistics.quantiles(ratios, n=4)[::2]))
