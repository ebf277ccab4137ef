#!/usr/bin/python3
"""Export models of architectures outside kiln's first model set, with seeded
test data: the model classes of issue 30 (1-D audio front ends, 3-D video
convolutions, a control-flow-wrapped streaming model, a segmentation head of
dilated convolutions, grouped convolutions).

    /usr/bin/python3 scripts/make_arch_models.py [--models a,b] [--out DIR] [--force]

Layout as scripts/export_models.py's (<cache>/<name>/model.onnx,
test_data_set_0/input_<i>.pb, torch_outputs/test_data_set_0/output_<i>.pb,
info.json).  Weights are random and seeded; opset 13 (17 where noted).

  audio_conv1d   an STFT written as a strided Conv1d (1 -> 258 channels,
                 kernel 256, hop 64) on 1 s of 16 kHz audio, its magnitude,
                 then five Conv1d + BatchNorm + ReLU blocks (kernel 3 and 5,
                 one depthwise, one grouped, two strided), a 1x1 head
  video_r3d      torchvision's r3d_18 (3x3x3 convs, a 3x7x7 stem) on one
                 clip of 8 frames of 112x112
  vad_if         a voice-activity model as people ship them: the whole
                 network inside an If on the sample rate (16 kHz / 8 kHz
                 branches), each an STFT conv, 1-D convs, an LSTM step and a
                 sigmoid head, with its LSTM state carried from call to call
                 (inputs x [1, 512], sr, state [2, 1, 128])
  aspp_seg       a DeepLabV3 head: ASPP (1x1, three 3x3 convs at dilation
                 12, 24 and 36, image pooling) on a 20x20 map of 512
                 channels from a small strided backbone, 160x160 input
  resnext_grouped  torchvision's resnext50_32x4d (32 groups in every
                 bottleneck's 3x3 conv), 224x224
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np

try:
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    import torch
    import torch.nn as nn
    import torchvision
except ImportError as e:  # pragma: no cover
    sys.exit("make_arch_models.py: %s\nRun it with /usr/bin/python3." % e)

SEED = 0
OPSET = 13


def default_cache():
    return os.environ.get("KILN_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                        "kiln", "models")


def randomize(model, gen):
    """Seeded weights with unit-ish activations: BatchNorm running stats and
    affine parameters away from the identity."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
            n = m.num_features
            m.weight.data = 0.5 + torch.rand(n, generator=gen)
            m.bias.data = 0.2 * torch.randn(n, generator=gen)
            m.running_mean.data = 0.1 * torch.randn(n, generator=gen)
            m.running_var.data = 0.5 + torch.rand(n, generator=gen)


def settle_bn(model, args, passes=2):
    """Running statistics from the model's own activations on random data, so
    that deep stacks neither explode nor vanish."""
    model.train()
    for mod in model.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
            mod.reset_running_stats()
            mod.momentum = None
    with torch.no_grad():
        for _ in range(passes):
            model(*args)
    model.eval()


# ---- audio_conv1d -------------------------------------------------------------

class Stft(nn.Module):
    """An STFT as a Conv1d over a Hann-windowed cosine/sine basis: the way
    audio models export it (Silero VAD, many keyword spotters)."""

    def __init__(self, n_fft=256, hop=64):
        super().__init__()
        bins = n_fft // 2 + 1
        t = torch.arange(n_fft, dtype=torch.float64)
        f = torch.arange(bins, dtype=torch.float64)[:, None]
        win = torch.hann_window(n_fft, periodic=True, dtype=torch.float64)
        ang = 2 * np.pi * f * t / n_fft
        basis = torch.cat([torch.cos(ang) * win, -torch.sin(ang) * win], 0)
        self.register_buffer("basis", basis.float()[:, None, :])
        self.hop, self.bins, self.pad = hop, bins, n_fft // 2

    def forward(self, x):  # x [n, samples]
        x = nn.functional.pad(x[:, None, :], (self.pad, self.pad), mode="reflect")
        s = nn.functional.conv1d(x, self.basis, stride=self.hop)
        re, im = s[:, :self.bins], s[:, self.bins:]
        return torch.sqrt(re * re + im * im + 1e-6)


def block1d(cin, cout, k, stride=1, groups=1):
    return nn.Sequential(nn.Conv1d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                         nn.BatchNorm1d(cout), nn.ReLU())


class AudioConv1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.stft = Stft()
        self.net = nn.Sequential(block1d(129, 128, 3), block1d(128, 128, 5, 2, groups=128),
                                 block1d(128, 128, 3, groups=8), block1d(128, 192, 3, 2),
                                 block1d(192, 192, 3))
        self.head = nn.Conv1d(192, 35, 1)

    def forward(self, x):
        return self.head(self.net(torch.log(self.stft(x) + 1e-3)))


# ---- vad_if -------------------------------------------------------------------

class VadBranch(nn.Module):
    def __init__(self, n_fft, hop):
        super().__init__()
        self.stft = Stft(n_fft, hop)
        bins = n_fft // 2 + 1
        self.enc = nn.Sequential(block1d(bins, 128, 3), block1d(128, 64, 3, 2),
                                 block1d(64, 64, 3, 2), block1d(64, 128, 3))
        self.lstm = nn.LSTMCell(128, 128)
        self.head = nn.Conv1d(128, 1, 1)

    def forward(self, x, state):
        f = self.enc(self.stft(x))            # [1, 128, t]
        f = f.mean(2)                         # [1, 128]
        h, c = self.lstm(f, (state[0], state[1]))
        out = torch.sigmoid(self.head(torch.relu(h)[:, :, None]))[:, 0, 0]
        return out, torch.stack([h, c])


def export_graph(module, args, names_in, names_out, prefix):
    """Exports module to an ONNX GraphProto whose value names carry prefix
    (inputs and outputs keep theirs)."""
    import io
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(module, args, buf, opset_version=OPSET, do_constant_folding=True,
                          input_names=names_in, output_names=names_out)
    m = onnx.load_from_string(buf.getvalue())
    g = m.graph
    keep = set(names_in) | set(names_out)
    ren = {}
    for init in g.initializer:
        ren[init.name] = prefix + init.name
    for n in g.node:
        for o in n.output:
            if o not in keep:
                ren[o] = prefix + o
        n.name = prefix + (n.name or n.op_type)
    for init in g.initializer:
        init.name = ren[init.name]
    for n in g.node:
        for i, v in enumerate(n.input):
            if v in ren:
                n.input[i] = ren[v]
        for i, v in enumerate(n.output):
            if v in ren:
                n.output[i] = ren[v]
    for vi in g.value_info:
        if vi.name in ren:
            vi.name = ren[vi.name]
    return g


def make_vad(gen):
    b16, b8 = VadBranch(256, 128), VadBranch(128, 64)
    for b, n in ((b16, 512), (b8, 256)):
        randomize(b, gen)
        settle_bn(b, (torch.randn(16, n, generator=gen), torch.zeros(2, 16, 128)))
        for p in b.lstm.parameters():
            p.data = 0.15 * torch.randn(p.shape, generator=gen)
        b.eval()
    x = torch.randn(1, 512, generator=gen) * 0.3
    st = torch.randn(2, 1, 128, generator=gen) * 0.1
    g16 = export_graph(b16, (x, st), ["x", "state"], ["b_out", "b_state"], "b16/")
    g8 = export_graph(b8, (x[:, :256], st), ["x", "state"], ["b_out", "b_state"], "b8/")
    # the 8 kHz branch reads the first 256 samples: a Slice in its body
    for g, nm in ((g16, "then_branch"), (g8, "else_branch")):
        inputs = [i.name for i in g.input]
        del g.input[:]
        g.name = nm
        if nm == "else_branch":
            # x of the body is x[:, :256] of the outer x
            g.node.insert(0, helper.make_node("Slice", ["x", "b8/starts", "b8/ends", "b8/axes"],
                                              ["b8/x"], name="b8/slice"))
            g.initializer.extend([numpy_helper.from_array(np.array([0], np.int64), "b8/starts"),
                                  numpy_helper.from_array(np.array([256], np.int64), "b8/ends"),
                                  numpy_helper.from_array(np.array([1], np.int64), "b8/axes")])
            for n in g.node[1:]:
                for i, v in enumerate(n.input):
                    if v == "x":
                        n.input[i] = "b8/x"
        assert inputs == ["x", "state"], inputs
    cond = helper.make_node("Equal", ["sr", "sr16k"], ["is16k"], name="sr_is_16k")
    iff = helper.make_node("If", ["is16k"], ["output", "stateN"], name="by_rate",
                           then_branch=g16, else_branch=g8)
    graph = helper.make_graph(
        [cond, iff], "vad_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, []),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, 128])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, 1, 128])],
        [numpy_helper.from_array(np.array(16000, np.int64), "sr16k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 7
    onnx.checker.check_model(model)
    inputs = [("x", x.numpy()), ("sr", np.array(16000, np.int64)), ("state", st.numpy())]
    with torch.no_grad():
        o, s = b16(x, st)
    return model, inputs, [("output", o.numpy()), ("stateN", s.numpy())]


# ---- aspp_seg -----------------------------------------------------------------

class AsppSeg(nn.Module):
    def __init__(self):
        super().__init__()

        def cbr(cin, cout, k=3, s=1):
            return [nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout),
                    nn.ReLU()]
        self.backbone = nn.Sequential(*cbr(3, 32, 3, 2), *cbr(32, 64, 3, 2), *cbr(64, 128, 3, 2),
                                      *cbr(128, 512, 3, 1))
        from torchvision.models.segmentation.deeplabv3 import DeepLabHead
        self.head = DeepLabHead(512, 21)

    def forward(self, x):
        y = self.head(self.backbone(x))
        return nn.functional.interpolate(y, size=x.shape[-2:], mode="bilinear",
                                         align_corners=False)


def make_torch(name, gen):
    """(model, example inputs [(name, array)], output names)"""
    if name == "audio_conv1d":
        m = AudioConv1d()
        x = torch.randn(1, 16000, generator=gen) * 0.3
        randomize(m, gen)
        settle_bn(m, (torch.randn(8, 16000, generator=gen) * 0.3,))
        return m, [("audio", x.numpy())], ["logits"]
    if name == "video_r3d":
        m = torchvision.models.video.r3d_18(num_classes=400)
        x = torch.randn(1, 3, 8, 112, 112, generator=gen)
        randomize(m, gen)
        settle_bn(m, (torch.randn(2, 3, 8, 112, 112, generator=gen),))
        return m, [("clip", x.numpy())], ["logits"]
    if name == "aspp_seg":
        m = AsppSeg()
        x = torch.randn(1, 3, 160, 160, generator=gen)
        randomize(m, gen)
        settle_bn(m, (torch.randn(4, 3, 160, 160, generator=gen),))
        return m, [("image", x.numpy())], ["mask"]
    if name == "resnext_grouped":
        m = torchvision.models.resnext50_32x4d()
        x = torch.randn(1, 3, 224, 224, generator=gen)
        randomize(m, gen)
        settle_bn(m, (torch.randn(2, 3, 224, 224, generator=gen),))
        return m, [("input", x.numpy())], ["logits"]
    raise KeyError(name)


MODELS = ["audio_conv1d", "video_r3d", "vad_if", "aspp_seg", "resnext_grouped"]


def write_pb(path, name, arr):
    # (np.ascontiguousarray would make a scalar 1-D)
    t = numpy_helper.from_array(np.require(arr, requirements="C"), name=name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def export_one(name, out, force):
    mdir = os.path.join(out, name)
    path = os.path.join(mdir, "model.onnx")
    if not force and os.path.exists(os.path.join(mdir, "info.json")):
        print("%-16s exists, skipped (--force to redo)" % name)
        return
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    if name == "vad_if":
        model, inputs, outputs = make_vad(gen)
    else:
        mod, inputs, out_names = make_torch(name, gen)
        mod.eval()
        args = tuple(torch.from_numpy(a) for _, a in inputs)
        import io
        buf = io.BytesIO()
        with torch.no_grad():
            torch.onnx.export(mod, args, buf, opset_version=OPSET, do_constant_folding=False,
                              input_names=[n for n, _ in inputs], output_names=out_names)
            res = mod(*args)
        model = onnx.load_from_string(buf.getvalue())
        res = res if isinstance(res, tuple) else (res,)
        outputs = [(n, r.numpy()) for n, r in zip(out_names, res)]
    if os.path.isdir(mdir):
        shutil.rmtree(mdir)
    os.makedirs(os.path.join(mdir, "test_data_set_0"))
    tdir = os.path.join(mdir, "torch_outputs", "test_data_set_0")
    os.makedirs(tdir)
    onnx.save(model, path)
    for i, (n, a) in enumerate(inputs):
        write_pb(os.path.join(mdir, "test_data_set_0", "input_%d.pb" % i), n, a)
    for i, (n, a) in enumerate(outputs):
        write_pb(os.path.join(tdir, "output_%d.pb" % i), n, a)
    link = os.path.join(out, name + ".onnx")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.join(name, "model.onnx"), link)
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    info = {"name": name, "file": "model.onnx", "opset": OPSET, "params": params,
            "bytes": os.path.getsize(path),
            "inputs": {n: list(a.shape) for n, a in inputs},
            "outputs": {n: list(a.shape) for n, a in outputs},
            "torch": torch.__version__, "torchvision": torchvision.__version__}
    with open(os.path.join(mdir, "info.json"), "w") as f:
        json.dump(info, f, indent=1)
    print("%-16s %8.2f MB %10d params" % (name, info["bytes"] / 1e6, params), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="all")
    ap.add_argument("--out", default=None)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    names = MODELS if a.models == "all" else a.models.split(",")
    for n in names:
        if n not in MODELS:
            ap.error("unknown model %s (known: %s)" % (n, ",".join(MODELS)))
    out = os.path.abspath(os.path.expanduser(a.out or default_cache()))
    os.makedirs(out, exist_ok=True)
    for n in names:
        export_one(n, out, a.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
