"""PyTorch idioms whose samples leave axis 0, exported by Debian's torch 1.13: the
graphs of tests/python/test_sample_axis.py, each with what bitgrad's analysis must find
(numerics.md §42) and the data it trains on from the CLI."""
import warnings

import torch
import torch.nn as tnn

VOCAB, SEQ, DIM = 113, 8, 16  # 113: the fortunes corpus's characters (the CLI's text data)


class TokenModel(tnn.Module):
    """Embedding -> body -> head over tokens [N, T]; seq_first: the body sees [T, N, E] (torch's
    default layout), and the result goes back to batch-first unless keep_seq_first."""

    def __init__(self, body, seq_first=False, keep_seq_first=False, positions=False):
        super().__init__()
        self.emb = tnn.Embedding(VOCAB, DIM)
        self.pos = tnn.Parameter(torch.randn(SEQ, DIM) * 0.1) if positions else None
        self.body, self.seq_first, self.keep = body, seq_first, keep_seq_first
        self.head = tnn.Linear(DIM, VOCAB)

    def forward(self, x):
        h = self.emb(x)
        if self.pos is not None:
            h = h + self.pos[:x.shape[1]]
        if self.seq_first:
            h = h.transpose(0, 1)
        h = self.body(h)
        if isinstance(h, tuple):
            h = h[0]
        if self.seq_first and not self.keep:
            h = h.transpose(0, 1)
        return self.head(h)


class SelfAttention(tnn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.attn = tnn.MultiheadAttention(DIM, 2, dropout=0.1, batch_first=batch_first)

    def forward(self, h):
        return self.attn(h, h, h, need_weights=False)[0]


class Causal(tnn.Module):
    """A causal TransformerEncoder (the issue's language model) or TransformerDecoder over itself."""

    def __init__(self, batch_first, decoder=False):
        super().__init__()
        self.bf, self.decoder = batch_first, decoder
        if decoder:
            self.net = tnn.TransformerDecoder(tnn.TransformerDecoderLayer(DIM, 2, 32, dropout=0.1, batch_first=batch_first), 1)
        else:
            self.net = tnn.TransformerEncoder(tnn.TransformerEncoderLayer(DIM, 2, 32, dropout=0.1, batch_first=batch_first), 2,
                                              enable_nested_tensor=False)

    def forward(self, h):
        t = h.shape[1] if self.bf else h.shape[0]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return self.net(h, h, tgt_mask=mask) if self.decoder else self.net(h, mask=mask)


class ConvNorm(tnn.Module):
    """Conv1d and BatchNorm1d over [N, C, T]."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.head = tnn.Conv1d(4, 8, 3, padding=1), tnn.BatchNorm1d(8), tnn.Linear(8 * SEQ, 5)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x))).flatten(1))


class Centered(tnn.Module):
    """Subtracts the batch's mean: a forward that mixes samples."""

    def forward(self, h):
        return h - h.mean(0, keepdim=True)


class BatchSoftmax(tnn.Module):
    def forward(self, h):
        return torch.softmax(h, 0)


def mlp(middle=None):
    layers = [tnn.Linear(8, 16), tnn.ReLU(), tnn.Dropout(0.2)] + ([middle] if middle is not None else []) + [tnn.Linear(16, 5)]
    return tnn.Sequential(*layers)


# name -> (module factory, input kind, expected mode, the op type of the node that decides it, or
# None; "output": the run must stop on its output)
CASES = {
    "mlp": (lambda: mlp(), "vector", "batch_rule", None),
    "conv_bn": (ConvNorm, "sequence", "batch_rule", None),
    "lstm": (lambda: TokenModel(tnn.LSTM(DIM, DIM, batch_first=True)), "tokens", "per_block", "Slice"),
    "lstm_seq_first": (lambda: TokenModel(tnn.LSTM(DIM, DIM), seq_first=True), "tokens", "per_block", "Slice"),
    "gru_seq_first": (lambda: TokenModel(tnn.GRU(DIM, DIM), seq_first=True), "tokens", "per_block", "Slice"),
    "attention": (lambda: TokenModel(SelfAttention(True)), "tokens", "per_block", "MatMul"),
    "attention_seq_first": (lambda: TokenModel(SelfAttention(False), seq_first=True), "tokens", "per_block", "MatMul"),
    "encoder_lm_seq_first": (lambda: TokenModel(Causal(False), seq_first=True, positions=True), "tokens", "per_block", "MatMul"),
    "encoder_lm": (lambda: TokenModel(Causal(True), positions=True), "tokens", "per_block", "MatMul"),
    "decoder_seq_first": (lambda: TokenModel(Causal(False, decoder=True), seq_first=True), "tokens", "per_block", "MatMul"),
    "embedding_mlp": (lambda: TokenModel(tnn.Sequential(tnn.Linear(DIM, DIM), tnn.GELU())), "tokens", "batch_rule", None),
    "seq_first_output": (lambda: TokenModel(tnn.Identity(), seq_first=True, keep_seq_first=True), "tokens", "output", None),
    "centered": (lambda: mlp(Centered()), "vector", "mixes_samples", "ReduceMean"),
    "batch_softmax": (lambda: mlp(BatchSoftmax()), "vector", "mixes_samples", "Softmax"),
}


def example(kind, n=4):
    if kind == "tokens":
        return torch.randint(0, VOCAB, (n, SEQ))
    if kind == "sequence":
        return torch.randn(n, 4, SEQ)
    return torch.randn(n, 8)


def export(name, path, seed=0):
    """Writes case `name` as ONNX (training mode, a free batch axis, opset 17) to path."""
    torch.manual_seed(seed)
    make, kind, _, _ = CASES[name]
    m = make()
    m.train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, example(kind), str(path), opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}})
    return m


def config(kind, onnx_file, batch=128):
    """A CLI configuration training the graph on the kind's data."""
    if kind == "tokens":
        data = ('dataset = "text"\npath = "/usr/share/games/fortunes"\nvocabulary = "characters"\nval_fraction = 0.1\n'
                'block_size = %d\n' % SEQ)
        loss = 'loss = "cross_entropy"\n'
    else:
        shape = "[4, %d]" % SEQ if kind == "sequence" else "[8]"
        data = 'dataset = "synthetic"\nsamples = 512\nshape = %s\nclasses = 5\n' % shape
        loss = ""
    return ('seed = 7\n[data]\n%s[model]\nonnx = "%s"\n[train]\nbatch_size = %d\n%s[optimizer]\ntype = "adam"\nlr = 0.003\n'
            % (data, onnx_file, batch, loss))


def export_all(out_dir, seed=0):
    """Every case as out_dir/NAME.onnx, and out_dir/manifest.txt: one line per graph, `NAME FILE
    KIND MODE BATCH_STATISTICS SEQ` (what the contract fuzzer's --torch reads, tests/contract)."""
    import os
    os.makedirs(out_dir, exist_ok=True)
    lines = []
    for name in sorted(CASES):
        path = os.path.abspath(os.path.join(out_dir, name + ".onnx"))
        export(name, path, seed)
        _, kind, mode, _ = CASES[name]
        lines.append("%s %s %s %s %d %d" % (name, path, kind, mode, name == "conv_bn", SEQ))
    with open(os.path.join(out_dir, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    import sys
    if len(sys.argv) != 3 or sys.argv[1] != "--export":
        sys.exit("usage: sample_axis_models.py --export DIR")
    export_all(sys.argv[2])
