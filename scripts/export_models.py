#!/usr/bin/python3
"""Export kiln's test/benchmark models to ONNX, with seeded test data.

Run with Debian's interpreter, which has python3-torch, python3-torchvision,
python3-onnx and python3-numpy:

    /usr/bin/python3 scripts/export_models.py [--models a,b] [--out DIR] [--force]

Every model is built from random, seeded weights (no downloads) and exported
with opset 13 and do_constant_folding=False, in eval mode.  Layout, one folder
per model under the cache directory ($KILN_CACHE, else ~/.cache/kiln/models):

    <cache>/<name>/model.onnx
    <cache>/<name>/test_data_set_<k>/input_<i>.pb     seeded inputs (TensorProto)
    <cache>/<name>/torch_outputs/test_data_set_<k>/output_<i>.pb
                                                      PyTorch's own outputs
    <cache>/<name>/info.json                          shapes, sizes, timings
    <cache>/<name>.onnx -> <name>/model.onnx          convenience symlink

test_data_set_0 is the canonical batch-1 case (224x224 images, BERT seq 128);
test_data_set_1 exercises the dynamic axes (batch 2; BERT seq 37).
The ONNX Runtime reference outputs (test_data_set_<k>/output_<i>.pb) are made
by scripts/make_reference.sh, not here.
"""

import argparse
import json
import math
import os
import shutil
import sys
import time

import numpy as np

try:
    import onnx
    from onnx import numpy_helper
    import torch
    import torch.nn as nn
    import torchvision
except ImportError as e:  # pragma: no cover
    sys.exit("export_models.py: %s\nRun it with /usr/bin/python3 after "
             "`apt-get install -y python3-torch python3-torchvision "
             "python3-onnx python3-numpy`." % e)

OPSET = 13
SEED = 0
ALL_MODELS = ["tinycnn", "squeezenet1_1", "mobilenet_v2", "efficientnet_b0",
              "resnet50", "bert_tiny", "bert_base"]


def default_cache():
    env = os.environ.get("KILN_CACHE")
    if env:
        return env
    return os.path.join(os.path.expanduser("~"), ".cache", "kiln", "models")


# --------------------------------------------------------------------------
# Random weights that exercise every parameter
# --------------------------------------------------------------------------

def randomize_affine_params(model, gen):
    """Default inits leave BatchNorm at gamma=1/beta=0 and many biases at 0:
    a kernel that ignored them would still pass.  Give them seeded values."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            with torch.no_grad():
                m.weight.copy_(torch.empty_like(m.weight).uniform_(0.5, 1.5, generator=gen))
                m.bias.copy_(torch.empty_like(m.bias).normal_(0.0, 0.2, generator=gen))
        elif isinstance(m, (nn.Conv2d, nn.Linear)) and m.bias is not None:
            with torch.no_grad():
                m.bias.copy_(torch.empty_like(m.bias).normal_(0.0, 0.05, generator=gen))


def calibrate_batchnorm(model, shape, gen, passes=2, batch=8):
    """Give BatchNorm running statistics that match the activations the
    (random) network actually produces, so that the eval-mode network keeps
    sane activation scales through deep stacks (ResNet-50)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average
    model.train()
    with torch.no_grad():
        for _ in range(passes):
            x = torch.randn((batch,) + tuple(shape[1:]), generator=gen)
            model(x)
    model.eval()


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------

class TinyCNN(nn.Module):
    """Bundled demo: 3 conv/bn/relu blocks, pooling, a residual add, a fc."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(32)
        self.c3 = nn.Conv2d(32, 32, 3, padding=1, bias=False)
        self.b3 = nn.BatchNorm2d(32)
        self.c4 = nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=True)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = self.pool(self.relu(self.b1(self.c1(x))))        # 16x16x16
        x = self.pool(self.relu(self.b2(self.c2(x))))        # 32x8x8
        x = self.relu(x + self.b3(self.c3(x)))               # residual
        x = self.relu(self.c4(x))                            # 64x4x4
        x = torch.flatten(self.gap(x), 1)
        return self.fc(x)


class BertLayerNorm(nn.Module):
    """LayerNorm written out so the export is decomposed the way Hugging Face's
    opset-13 exports look: ReduceMean, Sub, Pow, ReduceMean, Add(eps), Sqrt,
    Div, Mul, Add."""

    def __init__(self, d, eps=1e-12):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        d = x - u
        s = d.pow(2).mean(-1, keepdim=True)
        x = d / torch.sqrt(s + self.eps)
        return self.weight * x + self.bias


def gelu_erf(x):
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


class BertEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg["vocab"], cfg["d"])
        self.position_embeddings = nn.Embedding(cfg["max_pos"], cfg["d"])
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab"], cfg["d"])
        self.LayerNorm = BertLayerNorm(cfg["d"])
        self.register_buffer("position_ids", torch.arange(cfg["max_pos"]).expand((1, -1)))

    def forward(self, input_ids, token_type_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, 0:seq_length]
        e = self.word_embeddings(input_ids)
        e = e + self.token_type_embeddings(token_type_ids)
        e = e + self.position_embeddings(position_ids)
        return self.LayerNorm(e)


class BertSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.h = cfg["heads"]
        self.dh = cfg["d"] // cfg["heads"]
        self.all_head = self.h * self.dh
        self.query = nn.Linear(cfg["d"], self.all_head)
        self.key = nn.Linear(cfg["d"], self.all_head)
        self.value = nn.Linear(cfg["d"], self.all_head)

    def split(self, x):
        new_shape = x.size()[:-1] + (self.h, self.dh)
        x = x.view(new_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden, mask):
        q = self.split(self.query(hidden))
        k = self.split(self.key(hidden))
        v = self.split(self.value(hidden))
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores / math.sqrt(self.dh)
        scores = scores + mask
        probs = nn.functional.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v)
        ctx = ctx.permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (self.all_head,))
        return ctx


class BertLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, ff = cfg["d"], cfg["ff"]
        self.attention = BertSelfAttention(cfg)
        self.attn_out = nn.Linear(d, d)
        self.attn_ln = BertLayerNorm(d)
        self.intermediate = nn.Linear(d, ff)
        self.output = nn.Linear(ff, d)
        self.out_ln = BertLayerNorm(d)

    def forward(self, x, mask):
        a = self.attention(x, mask)
        x = self.attn_ln(self.attn_out(a) + x)
        h = gelu_erf(self.intermediate(x))
        return self.out_ln(self.output(h) + x)


class BertModel(nn.Module):
    """BERT encoder + pooler, structured like transformers' BertModel."""

    def __init__(self, cfg):
        super().__init__()
        self.embeddings = BertEmbeddings(cfg)
        self.layers = nn.ModuleList([BertLayer(cfg) for _ in range(cfg["layers"])])
        self.pooler = nn.Linear(cfg["d"], cfg["d"])

    def forward(self, input_ids, attention_mask, token_type_ids):
        ext = attention_mask[:, None, None, :]
        ext = ext.to(dtype=torch.float32)
        ext = (1.0 - ext) * -10000.0
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            x = layer(x, ext)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled


def init_bert(model, gen, std):
    """HF-style normal init, but with non-zero biases and LayerNorm affines so
    every parameter matters.  std is a little above HF's 0.02 so that random
    attention is not almost uniform."""
    for name, p in model.named_parameters():
        with torch.no_grad():
            if name.endswith("LayerNorm.weight") or name.endswith("_ln.weight"):
                p.copy_(1.0 + torch.empty_like(p).normal_(0.0, 0.1, generator=gen))
            elif name.endswith("bias"):
                p.copy_(torch.empty_like(p).normal_(0.0, 0.02, generator=gen))
            else:
                p.copy_(torch.empty_like(p).normal_(0.0, std, generator=gen))


BERT_CONFIGS = {
    "bert_base": dict(layers=12, d=768, heads=12, ff=3072, vocab=30522,
                      max_pos=512, type_vocab=2),
    "bert_tiny": dict(layers=2, d=128, heads=2, ff=512, vocab=30522,
                      max_pos=512, type_vocab=2),
}

CNN_SPECS = {
    # name: (constructor, input shape)
    "tinycnn": (lambda: TinyCNN(), (1, 3, 32, 32)),  # keeps BatchNormalization nodes
    "squeezenet1_1": (lambda: torchvision.models.squeezenet1_1(weights=None), (1, 3, 224, 224)),
    "mobilenet_v2": (lambda: torchvision.models.mobilenet_v2(weights=None), (1, 3, 224, 224)),
    "efficientnet_b0": (lambda: torchvision.models.efficientnet_b0(weights=None), (1, 3, 224, 224)),
    "resnet50": (lambda: torchvision.models.resnet50(weights=None), (1, 3, 224, 224)),
}


# --------------------------------------------------------------------------
# Test inputs
# --------------------------------------------------------------------------

def cnn_inputs(shape):
    rng = np.random.RandomState(SEED + 1)
    sets = []
    for batch in (1, 2):
        x = rng.standard_normal((batch,) + tuple(shape[1:])).astype(np.float32)
        sets.append([("input", x)])
    return sets


def bert_inputs(vocab):
    """Token ids in [0, vocab) with [CLS]=101 / [SEP]=102 and id 0 padding,
    attention_mask with trailing zeros, token_type_ids 0/1 segments."""
    rng = np.random.RandomState(SEED + 2)
    sets = []
    for batch, seq, valid in ((1, 128, [112]), (2, 37, [37, 20])):
        ids = np.zeros((batch, seq), np.int64)
        mask = np.zeros((batch, seq), np.int64)
        tt = np.zeros((batch, seq), np.int64)
        for b, n in enumerate(valid):
            ids[b, :n] = rng.randint(1000, vocab, size=n)
            ids[b, 0] = 101
            ids[b, n - 1] = 102
            mask[b, :n] = 1
            tt[b, n // 2:n] = 1
        sets.append([("input_ids", ids), ("attention_mask", mask), ("token_type_ids", tt)])
    return sets


# --------------------------------------------------------------------------
# Export driver
# --------------------------------------------------------------------------

def build(name):
    """Returns (model, example_args, input_names, output_names, dynamic_axes,
    test_sets, keep_bn).  keep_bn: export with TrainingMode.PRESERVE (the model
    is in eval mode) so that the exporter's eval peephole does not fold
    BatchNormalization into the preceding Conv; the torchvision models take
    the default (EVAL) path, which folds it, as users' exports do."""
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    if name in CNN_SPECS:
        ctor, shape = CNN_SPECS[name]
        model = ctor()
        randomize_affine_params(model, gen)
        calibrate_batchnorm(model, shape, gen)
        model.eval()
        sets = cnn_inputs(shape)
        args = (torch.from_numpy(sets[0][0][1]),)
        return (model, args, ["input"], ["logits"],
                {"input": {0: "batch"}, "logits": {0: "batch"}}, sets,
                name == "tinycnn")
    if name in BERT_CONFIGS:
        cfg = BERT_CONFIGS[name]
        model = BertModel(cfg)
        init_bert(model, gen, std=0.035)
        model.eval()
        sets = bert_inputs(cfg["vocab"])
        args = tuple(torch.from_numpy(a) for _, a in sets[0])
        names = [n for n, _ in sets[0]]
        dyn = {n: {0: "batch", 1: "sequence"} for n in names}
        dyn["last_hidden_state"] = {0: "batch", 1: "sequence"}
        dyn["pooler_output"] = {0: "batch"}
        return (model, args, names, ["last_hidden_state", "pooler_output"], dyn, sets, False)
    raise KeyError(name)


def write_pb(path, name, arr):
    t = numpy_helper.from_array(np.ascontiguousarray(arr), name=name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def shape_str(a):
    return "x".join(str(d) for d in a.shape)


def export_one(name, out_dir, force):
    mdir = os.path.join(out_dir, name)
    model_path = os.path.join(mdir, "model.onnx")
    info_path = os.path.join(mdir, "info.json")
    if not force and os.path.exists(model_path) and os.path.exists(info_path) and \
            os.path.exists(os.path.join(mdir, "test_data_set_0", "input_0.pb")):
        print("%-16s exists, skipped (--force to redo)" % name, flush=True)
        return json.load(open(info_path))

    t0 = time.time()
    model, args, in_names, out_names, dyn, sets, keep_bn = build(name)
    t_build = time.time() - t0

    if os.path.isdir(mdir):
        shutil.rmtree(mdir)
    os.makedirs(mdir)
    tmp = model_path + ".tmp"
    t0 = time.time()
    with torch.no_grad():
        torch.onnx.export(model, args, tmp, opset_version=OPSET,
                          do_constant_folding=False, export_params=True,
                          input_names=in_names, output_names=out_names,
                          dynamic_axes=dyn,
                          training=(torch.onnx.TrainingMode.PRESERVE if keep_bn
                                    else torch.onnx.TrainingMode.EVAL))
    t_export = time.time() - t0
    m = onnx.load(tmp)
    onnx.checker.check_model(m)
    os.replace(tmp, model_path)

    link = os.path.join(out_dir, name + ".onnx")
    try:
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join(name, "model.onnx"), link)
    except OSError:
        pass

    # Test data and PyTorch's own outputs.
    t0 = time.time()
    set_info = []
    for k, inputs in enumerate(sets):
        ddir = os.path.join(mdir, "test_data_set_%d" % k)
        tdir = os.path.join(mdir, "torch_outputs", "test_data_set_%d" % k)
        os.makedirs(ddir)
        os.makedirs(tdir)
        for i, (n, a) in enumerate(inputs):
            write_pb(os.path.join(ddir, "input_%d.pb" % i), n, a)
        with torch.no_grad():
            outs = model(*[torch.from_numpy(a) for _, a in inputs])
        if isinstance(outs, torch.Tensor):
            outs = (outs,)
        outs = [o.numpy() for o in outs]
        for i, (n, o) in enumerate(zip(out_names, outs)):
            write_pb(os.path.join(tdir, "output_%d.pb" % i), n, o)
        set_info.append({
            "inputs": {n: shape_str(a) for n, a in inputs},
            "outputs": {n: {"shape": shape_str(o), "mean": float(o.mean()),
                            "std": float(o.std()), "absmax": float(np.abs(o).max())}
                        for n, o in zip(out_names, outs)},
        })
    t_torch = time.time() - t0

    n_params = sum(int(np.prod(t.dims)) for t in m.graph.initializer)
    ops = {}
    for node in m.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    info = {
        "name": name,
        "file": "model.onnx",
        "bytes": os.path.getsize(model_path),
        "opset": OPSET,
        "params": n_params,
        "nodes": len(m.graph.node),
        "op_counts": dict(sorted(ops.items())),
        "inputs": [(i.name, i.type.tensor_type.elem_type,
                    [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
                   for i in m.graph.input],
        "outputs": [(o.name, o.type.tensor_type.elem_type,
                     [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim])
                    for o in m.graph.output],
        "test_sets": set_info,
        "seconds": {"build": round(t_build, 2), "export": round(t_export, 2),
                    "torch_run": round(t_torch, 2)},
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "onnx": onnx.__version__,
    }
    with open(info_path, "w") as f:
        json.dump(info, f, indent=1)
    print("%-16s %8.1f MB  %9d params  %4d nodes  build %.1fs export %.1fs torch %.1fs"
          % (name, info["bytes"] / 1e6, n_params, len(m.graph.node),
             t_build, t_export, t_torch), flush=True)
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="all",
                    help="comma-separated subset of: %s (default all)" % ",".join(ALL_MODELS))
    ap.add_argument("--out", default=None,
                    help="output directory (default $KILN_CACHE or ~/.cache/kiln/models)")
    ap.add_argument("--force", action="store_true", help="re-export models that exist")
    ap.add_argument("--list", action="store_true", help="list model names and exit")
    a = ap.parse_args()
    if a.list:
        print("\n".join(ALL_MODELS))
        return 0
    names = ALL_MODELS if a.models == "all" else [s.strip() for s in a.models.split(",") if s.strip()]
    bad = [n for n in names if n not in ALL_MODELS]
    if bad:
        ap.error("unknown model(s): %s (known: %s)" % (",".join(bad), ",".join(ALL_MODELS)))
    out = os.path.abspath(os.path.expanduser(a.out or default_cache()))
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    print("exporting to %s (torch %s, onnx %s, opset %d)" % (out, torch.__version__,
                                                             onnx.__version__, OPSET), flush=True)
    for n in names:
        export_one(n, out, a.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
