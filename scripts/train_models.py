#!/usr/bin/python3
"""Train kiln's small REAL models, for accuracy measurements, and export them.

The models of export_models.py have random weights: good for checking kernels
against a reference, useless for judging what bf16, fp16 or int8 engines do
to accuracy.  The models here are trained (seeded, deterministic, a few tens
of seconds on one core) and come with labelled held-out data:

    /usr/bin/python3 scripts/train_models.py [--models a,b] [--out DIR] [--force]
                                             [--ort-reference] [--list]

  digits_cnn  scikit-learn's handwritten digits (load_digits: 1797 8x8 images,
              shipped inside python3-sklearn), a small CNN.  Input float32
              [batch,1,8,8] in [0,1], output logits [batch,10].
  seq_gru     a synthetic sequence task that needs memory: 20 tokens from a
              vocabulary of 16 (0-9 digits, 10-15 fillers); the class is the
              digit that occurs most often (ties never generated).  Embedding
              + ONNX GRU + Linear.  Input int64 [batch,20], logits [batch,10].
  seq_attn    the same task with a one-layer transformer encoder (Gather
              embeddings + positions, MatMul attention, Softmax, decomposed
              LayerNorm, erf GELU, mean pooling, Gemm head).

Layout, one folder per model under the cache ($KILN_CACHE, else
~/.cache/kiln/models), as export_models.py's:

    <cache>/<name>/model.onnx                opset 13, eval mode, dynamic batch,
                                             constant folding on (torch's default,
                                             unlike export_models.py: BN folded into
                                             Conv, the GRU's weights already in ONNX
                                             gate order, as users' exports are)
    <cache>/<name>/info.json                 split sizes, seed, PyTorch fp32
                                             accuracies, params, op counts,
                                             training time, script hash
    <cache>/<name>/test_data_set_0/input_0.pb   the first 16 held-out samples
                                             as one batch (TensorProto)
    <cache>/<name>/torch_outputs/test_data_set_0/output_0.pb   PyTorch's logits
    <cache>/<name>/heldout/sample_<kkkk>/input_0.pb   one held-out sample per
                                             folder, batch 1 (kiln validate
                                             --data, scripts/eval_accuracy.py)
    <cache>/<name>/heldout/labels.txt        one integer label per line, line k
                                             for sample_<k> (k zero-padded to 4)
    <cache>/<name>/heldout/torch_outputs.npy PyTorch's fp32 logits, [N,10]
    <cache>/<name>/calib/...                 the same for the calibration split
    <cache>/<name>.onnx -> <name>/model.onnx convenience symlink

With --ort-reference, ONNX Runtime's outputs for test_data_set_0 are written
as test_data_set_0/output_0.pb (node scripts/ort_run.js, as make_reference.sh
does) and checked against PyTorch's; tests/real_models.sh then runs the model
through the conformance runner too.

Idempotent: a model whose info.json records this script's SHA-256 is not
retrained (--force retrains).  Training is single-threaded and deterministic
(torch.use_deterministic_algorithms), so a retrain gives the same weights.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np

try:
    import onnx
    from onnx import numpy_helper
    import torch
    import torch.nn as nn
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
except ImportError as e:  # pragma: no cover
    sys.exit("train_models.py: %s\nRun it with /usr/bin/python3 after "
             "`apt-get install -y python3-torch python3-onnx python3-numpy "
             "python3-sklearn` (or scripts/install_deps.sh --models)." % e)

OPSET = 13
SEED = 0
ALL_MODELS = ["digits_cnn", "seq_gru", "seq_attn"]
TEST_BATCH = 16          # held-out samples in test_data_set_0
HERE = os.path.dirname(os.path.abspath(__file__))


def default_cache():
    env = os.environ.get("KILN_CACHE")
    if env:
        return env
    return os.path.join(os.path.expanduser("~"), ".cache", "kiln", "models")


def script_hash():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def seed_everything(seed):
    torch.manual_seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(True)


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------

def digits_data():
    """load_digits (pixel values 0..16) scaled to [0,1], stratified split
    60/10/30 into train / calib / test."""
    d = load_digits()
    x = (d.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = d.target.astype(np.int64)
    x_rest, x_test, y_rest, y_test = train_test_split(
        x, y, test_size=0.30, stratify=y, random_state=SEED)
    x_train, x_cal, y_train, y_cal = train_test_split(
        x_rest, y_rest, test_size=0.10 / 0.70, stratify=y_rest, random_state=SEED)
    return {"train": (x_train, y_train), "calib": (x_cal, y_cal), "test": (x_test, y_test)}


SEQ_LEN, SEQ_VOCAB, SEQ_CLASSES = 20, 16, 10
SEQ_DIGIT_P = 0.75


def seq_generate(rng, n):
    """n sequences of SEQ_LEN tokens: each a digit 0-9 with probability 0.75,
    else a filler 10-15; the label is the most frequent digit.  Sequences with
    a tie for the most frequent digit are drawn again."""
    xs = np.empty((n, SEQ_LEN), np.int64)
    ys = np.empty(n, np.int64)
    k = 0
    while k < n:
        m = 2 * (n - k) + 64
        digit = rng.random_sample((m, SEQ_LEN)) < SEQ_DIGIT_P
        x = np.where(digit, rng.randint(0, 10, (m, SEQ_LEN)),
                     rng.randint(10, SEQ_VOCAB, (m, SEQ_LEN)))
        cnt = np.stack([(x == c).sum(1) for c in range(SEQ_CLASSES)], 1)
        unique = (cnt == cnt.max(1, keepdims=True)).sum(1) == 1
        x, y = x[unique], cnt[unique].argmax(1)
        t = min(len(x), n - k)
        xs[k:k + t], ys[k:k + t] = x[:t], y[:t]
        k += t
    return xs, ys


def seq_data():
    """8000 train, 200 calib, 500 test sequences, each split from its own
    seeded stream."""
    return {"train": seq_generate(np.random.RandomState(SEED + 10), 8000),
            "calib": seq_generate(np.random.RandomState(SEED + 11), 200),
            "test": seq_generate(np.random.RandomState(SEED + 12), 500)}


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------

class DigitsCNN(nn.Module):
    """Three Conv3x3+BN+ReLU blocks (16, 32, 64 channels), two 2x2 max pools
    (8x8 -> 4x4 -> 2x2), Flatten, Linear(256, 10).  The exporter folds each
    BN into its Conv (eval mode), as users' exports do."""

    def __init__(self):
        super().__init__()
        def block(cin, cout):
            return [nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                    nn.BatchNorm2d(cout), nn.ReLU()]
        self.features = nn.Sequential(*block(1, 16), *block(16, 32), nn.MaxPool2d(2),
                                      *block(32, 64), nn.MaxPool2d(2))
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(64 * 2 * 2, 10)

    def forward(self, x):
        return self.fc(self.drop(torch.flatten(self.features(x), 1)))


class SeqGRU(nn.Module):
    """Embedding(16, 16) -> GRU(16, 32), batch_first -> last hidden state ->
    Linear(32, 10).  Exports as Gather, Transpose, the ONNX GRU op
    (linear_before_reset=1, PyTorch's form), Squeeze and Gemm."""

    def __init__(self, emb=16, hidden=32):
        super().__init__()
        self.emb = nn.Embedding(SEQ_VOCAB, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, SEQ_CLASSES)

    def forward(self, tokens):
        _, h = self.gru(self.emb(tokens))
        return self.fc(h[0])


class LayerNorm(nn.Module):
    """Written out so that opset 13 gets the decomposed form (ReduceMean, Sub,
    Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) that kiln's layernorm pass
    recognises, as in export_models.py's BERT."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        d = x - u
        s = d.pow(2).mean(-1, keepdim=True)
        return self.weight * (d / torch.sqrt(s + self.eps)) + self.bias


class SeqAttn(nn.Module):
    """Token + position embeddings (d 32), one post-LN encoder layer with 2
    heads (explicit q/k/v Linear, MatMul, Softmax, MatMul) and an erf-GELU MLP
    (d 64), mean over the sequence, Linear(32, 10)."""

    def __init__(self, d=32, heads=2, ff=64):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.tok = nn.Embedding(SEQ_VOCAB, d)
        self.pos = nn.Parameter(torch.randn(1, SEQ_LEN, d) * 0.1)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln1 = LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.ln2 = LayerNorm(d)
        self.fc = nn.Linear(d, SEQ_CLASSES)

    def split(self, x):
        b, s, _ = x.shape
        return x.reshape(b, s, self.h, self.dh).permute(0, 2, 1, 3)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        a = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) / (self.dh ** 0.5), dim=-1)
        c = torch.matmul(a, v).permute(0, 2, 1, 3)
        c = c.reshape(c.shape[0], c.shape[1], self.h * self.dh)
        x = self.ln1(x + self.o(c))
        x = self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))
        return self.fc(x.mean(1))


# Per model: its data, constructor, input name, training schedule and task.
SPECS = {
    "digits_cnn": dict(data=digits_data, model=DigitsCNN, input="input", epochs=40,
                       batch=32, lr=3e-3,
                       task="sklearn load_digits, 8x8 handwritten digits, 10 classes"),
    "seq_gru": dict(data=seq_data, model=SeqGRU, input="tokens", epochs=8,
                    batch=128, lr=1e-2,
                    task="most frequent digit among 20 tokens (vocab 16: 0-9 digits, "
                         "10-15 fillers), 10 classes"),
    "seq_attn": dict(data=seq_data, model=SeqAttn, input="tokens", epochs=6,
                     batch=128, lr=5e-3,
                     task="most frequent digit among 20 tokens (vocab 16: 0-9 digits, "
                          "10-15 fillers), 10 classes"),
}


# --------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------

def predict(model, x, batch=512):
    model.eval()
    outs = []
    with torch.no_grad():
        for i in range(0, len(x), batch):
            outs.append(model(torch.from_numpy(x[i:i + batch])).numpy())
    return np.concatenate(outs)


def accuracy(logits, y):
    return float((logits.argmax(1) == y).mean())


def train(name, spec, data):
    seed_everything(SEED)
    model = spec["model"]()
    x, y = data["train"]
    X, Y = torch.from_numpy(x), torch.from_numpy(y)
    bs, epochs = spec["batch"], spec["epochs"]
    steps = epochs * ((len(X) + bs - 1) // bs)
    opt = torch.optim.AdamW(model.parameters(), lr=spec["lr"], weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=spec["lr"], total_steps=steps)
    gen = torch.Generator().manual_seed(SEED)
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(X), generator=gen)
        total = 0.0
        for i in range(0, len(X), bs):
            j = perm[i:i + bs]
            loss = nn.functional.cross_entropy(model(X[j]), Y[j])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss) * len(j)
        if epoch == epochs - 1 or epoch % 5 == 0:
            print("  %-10s epoch %2d  loss %.4f" % (name, epoch, total / len(X)), flush=True)
    model.eval()
    return model


# --------------------------------------------------------------------------
# Export and data layout
# --------------------------------------------------------------------------

def write_pb(path, name, arr):
    t = numpy_helper.from_array(np.ascontiguousarray(arr), name=name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def write_split(sdir, in_name, x, y, logits):
    os.makedirs(sdir)
    for k in range(len(x)):
        d = os.path.join(sdir, "sample_%04d" % k)
        os.makedirs(d)
        write_pb(os.path.join(d, "input_0.pb"), in_name, x[k:k + 1])
    with open(os.path.join(sdir, "labels.txt"), "w") as f:
        f.write("".join("%d\n" % v for v in y))
    np.save(os.path.join(sdir, "torch_outputs.npy"), logits.astype(np.float32))


def ort_reference(mdir):
    """ONNX Runtime's outputs for test_data_set_0, checked against PyTorch's."""
    ddir = os.path.join(mdir, "test_data_set_0")
    if os.path.exists(os.path.join(ddir, "output_0.pb")):
        return
    if not os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")):
        subprocess.check_call(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
                              cwd=HERE, stdout=subprocess.DEVNULL)
    tmp = os.path.join(mdir, ".ort_out")
    shutil.rmtree(tmp, ignore_errors=True)
    subprocess.check_call(["node", os.path.join(HERE, "ort_run.js"),
                           os.path.join(mdir, "model.onnx"), "--input-dir", ddir,
                           "--output-dir", tmp, "--threads", "1", "--quiet"])
    r = subprocess.run([sys.executable, os.path.join(HERE, "compare_outputs.py"), tmp,
                        os.path.join(mdir, "torch_outputs", "test_data_set_0"),
                        "--rtol", "1e-3", "--atol", "1e-4"],
                       stdout=subprocess.PIPE, universal_newlines=True)
    print("  ORT vs PyTorch: " + r.stdout.strip().replace("\n", "\n  "), flush=True)
    if r.returncode != 0:
        shutil.rmtree(tmp)
        raise RuntimeError("%s: ONNX Runtime and PyTorch disagree" % mdir)
    os.replace(os.path.join(tmp, "output_0.pb"), os.path.join(ddir, "output_0.pb"))
    shutil.rmtree(tmp)


def up_to_date(mdir, digest):
    info_path = os.path.join(mdir, "info.json")
    try:
        with open(info_path) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return None
    need = ["model.onnx", "test_data_set_0/input_0.pb", "heldout/labels.txt",
            "calib/labels.txt", "torch_outputs/test_data_set_0/output_0.pb"]
    if info.get("script_sha256") != digest or \
            not all(os.path.exists(os.path.join(mdir, p)) for p in need):
        return None
    return info


def make_one(name, out_dir, force, digest):
    mdir = os.path.join(out_dir, name)
    if not force:
        info = up_to_date(mdir, digest)
        if info is not None:
            print("%-10s up to date (script hash matches), skipped (--force to retrain)"
                  % name, flush=True)
            return info
    spec = SPECS[name]
    in_name = spec["input"]
    t0 = time.time()
    data = spec["data"]()
    t_data = time.time() - t0
    t0 = time.time()
    model = train(name, spec, data)
    t_train = time.time() - t0

    logits = {s: predict(model, data[s][0]) for s in ("train", "calib", "test")}
    acc = {s: accuracy(logits[s], data[s][1]) for s in logits}

    tmp_dir = mdir + ".tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    os.makedirs(tmp_dir)
    model_path = os.path.join(tmp_dir, "model.onnx")
    x_test, y_test = data["test"]
    example = torch.from_numpy(x_test[:TEST_BATCH])
    t0 = time.time()
    with torch.no_grad():
        torch.onnx.export(model, (example,), model_path, opset_version=OPSET,
                          do_constant_folding=True, export_params=True,
                          input_names=[in_name], output_names=["logits"],
                          dynamic_axes={in_name: {0: "batch"}, "logits": {0: "batch"}},
                          training=torch.onnx.TrainingMode.EVAL)
    t_export = time.time() - t0
    m = onnx.load(model_path)
    onnx.checker.check_model(m)

    ddir = os.path.join(tmp_dir, "test_data_set_0")
    tdir = os.path.join(tmp_dir, "torch_outputs", "test_data_set_0")
    os.makedirs(ddir)
    os.makedirs(tdir)
    write_pb(os.path.join(ddir, "input_0.pb"), in_name, x_test[:TEST_BATCH])
    with torch.no_grad():
        out = model(example).numpy()
    write_pb(os.path.join(tdir, "output_0.pb"), "logits", out)
    write_split(os.path.join(tmp_dir, "heldout"), in_name, x_test, y_test, logits["test"])
    write_split(os.path.join(tmp_dir, "calib"), in_name, data["calib"][0],
                data["calib"][1], logits["calib"])

    ops = {}
    for node in m.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    heldout_correct = int((logits["test"].argmax(1) == y_test).sum())
    info = {
        "name": name,
        "task": spec["task"],
        "file": "model.onnx",
        "bytes": os.path.getsize(model_path),
        "opset": OPSET,
        "params": sum(int(np.prod(t.dims)) for t in m.graph.initializer),
        "nodes": len(m.graph.node),
        "op_counts": dict(sorted(ops.items())),
        "input": {"name": in_name, "dtype": str(x_test.dtype),
                  "shape": ["batch"] + list(x_test.shape[1:])},
        "output": {"name": "logits", "shape": ["batch", int(out.shape[1])]},
        "seed": SEED,
        "split": {s: int(len(data[s][1])) for s in ("train", "calib", "test")},
        "epochs": spec["epochs"], "batch": spec["batch"], "lr": spec["lr"],
        "torch_accuracy": {"train": acc["train"], "calib": acc["calib"],
                           "heldout": acc["test"]},
        "heldout_correct": heldout_correct,
        "heldout_samples": int(len(y_test)),
        "test_data_set_0": {"samples": TEST_BATCH, "from": "heldout/sample_0000.."},
        "seconds": {"data": round(t_data, 2), "train": round(t_train, 2),
                    "export": round(t_export, 2)},
        "script_sha256": digest,
        "torch": torch.__version__, "onnx": onnx.__version__, "numpy": np.__version__,
    }
    with open(os.path.join(tmp_dir, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")

    shutil.rmtree(mdir, ignore_errors=True)
    os.replace(tmp_dir, mdir)
    link = os.path.join(out_dir, name + ".onnx")
    try:
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join(name, "model.onnx"), link)
    except OSError:
        pass
    print("%-10s %6.1f kB  %6d params  %3d nodes  train %.1fs  held-out %.2f%% (%d/%d)  "
          "calib %.2f%%  train %.2f%%"
          % (name, info["bytes"] / 1e3, info["params"], info["nodes"], t_train,
             100 * acc["test"], heldout_correct, len(y_test), 100 * acc["calib"],
             100 * acc["train"]), flush=True)
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="all",
                    help="comma-separated subset of: %s (default all)" % ",".join(ALL_MODELS))
    ap.add_argument("--out", default=None,
                    help="output directory (default $KILN_CACHE or ~/.cache/kiln/models)")
    ap.add_argument("--force", action="store_true", help="retrain models that are up to date")
    ap.add_argument("--ort-reference", action="store_true",
                    help="also write ONNX Runtime's outputs for test_data_set_0 "
                         "(node, onnxruntime-node in scripts/node_modules)")
    ap.add_argument("--list", action="store_true", help="list model names and exit")
    a = ap.parse_args()
    if a.list:
        print("\n".join(ALL_MODELS))
        return 0
    names = ALL_MODELS if a.models == "all" else \
        [s.strip() for s in a.models.split(",") if s.strip()]
    bad = [n for n in names if n not in ALL_MODELS]
    if bad:
        ap.error("unknown model(s): %s (known: %s)" % (",".join(bad), ",".join(ALL_MODELS)))
    out = os.path.abspath(os.path.expanduser(a.out or default_cache()))
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    # The exporter warns that a GRU exported at batch 16 may not run at other
    # batches (it builds the zero initial state from the input's Shape, so it
    # does: tests/trained_models.sh runs batches 1 and 16) and that prim::Constant
    # has no shape inference; neither applies.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
    digest = script_hash()
    print("training into %s (torch %s, onnx %s, opset %d, seed %d, 1 thread)"
          % (out, torch.__version__, onnx.__version__, OPSET, SEED), flush=True)
    t0 = time.time()
    for n in names:
        make_one(n, out, a.force, digest)
        if a.ort_reference:
            ort_reference(os.path.join(out, n))
    print("done in %.1fs" % (time.time() - t0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
