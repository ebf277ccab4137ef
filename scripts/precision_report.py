#!/usr/bin/python3
"""Accuracy of kiln's reduced precisions, as markdown tables.

    scripts/precision_report.py [--kiln build/kiln] [--cache DIR]
                                [--trained a,b] [--exported a,b] [--out FILE]

Two tables, each row measured now with the given kiln binary:

1. Trained models (scripts/train_models.py: digits_cnn, seq_gru, seq_attn):
   held-out top-1 accuracy of engines built in fp32, bf16, fp16, fp16
   weights, int8 weights and int8 with each calibration method (minmax,
   percentile 99.99, entropy, mse; calibrated on the model's calib/ split,
   never on the held-out one), against PyTorch's fp32 accuracy from
   info.json (scripts/eval_accuracy.py does the counting).
2. Exported models (scripts/export_models.py; random weights, so accuracy
   means nothing there): the cosine of each reduced-precision engine's
   outputs to the fp32 reference path on test_data_set_0 (`kiln compare
   MODEL --precision P`; the worst output), int8 calibrated with entropy on
   the same test_data_set_0 inputs (one sample: the ranges of exactly the
   data compared, so this shows the arithmetic's error, not calibration's).

Engines are built with heuristic tactics (KILN_TACTICS=heuristic), so no
step a precision reaches is timed back to fp32: the accuracy is that of
every step the precision can reach.  A model missing from the cache is
skipped with a note.  Needs only the
standard library and numpy (through eval_accuracy.py).  Exit 1 when a kiln
command fails.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINED = ["digits_cnn", "seq_gru", "seq_attn"]
EXPORTED = ["tinycnn", "squeezenet1_1", "mobilenet_v2", "efficientnet_b0", "resnet50",
            "bert_tiny", "bert_base"]
METHODS = ["minmax", "percentile", "entropy", "mse"]
# (label, kiln build arguments, calibration method or None)
TRAINED_ROWS = [("fp32", [], None), ("bf16", ["--precision", "bf16"], None),
                ("fp16", ["--precision", "fp16"], None),
                ("fp16 weights", ["--weights", "fp16"], None),
                ("int8 weights", ["--weights", "int8"], None)] + \
               [("int8 " + m, ["--precision", "int8"], m) for m in METHODS]
EXPORTED_PRECISIONS = ["bf16", "fp16", "int8"]


# Heuristic tactics: no step is timed back to fp32 (kn_precisions_time), so
# every step that can take the precision does, and the accuracy is that of
# the whole reduced engine.
ENV = dict(os.environ, KILN_TACTICS="heuristic")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    if p.returncode not in (0, 1) or (p.returncode == 1 and "compare" not in cmd[1:2]):
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), p.returncode,
                                                 p.stderr.strip().splitlines()[-1:]))
    return p.stdout


def input_shapes(model_dir):
    """--shape arguments from test_data_set_0's inputs (eval_accuracy's reader)."""
    sys.path.insert(0, HERE)
    import eval_accuracy
    args, i = [], 0
    d = os.path.join(model_dir, "test_data_set_0")
    while os.path.isfile(os.path.join(d, "input_%d.pb" % i)):
        name, arr = eval_accuracy.read_tensor_pb(os.path.join(d, "input_%d.pb" % i))
        args += ["--shape", "%s=%s" % (name, "x".join(str(x) for x in arr.shape))]
        i += 1
    return args


def trained_table(a, tmp):
    lines = ["| model | precision | calibration | held-out top-1 | vs PyTorch fp32 | "
             "same top-1 as PyTorch | max \\|logit diff\\| |",
             "|---|---|---|---:|---:|---:|---:|"]
    for name in a.trained:
        model = os.path.join(a.cache, name + ".onnx")
        data = os.path.join(a.cache, name, "heldout")
        calib_dir = os.path.join(a.cache, name, "calib")
        if not os.path.isfile(model) or not os.path.isdir(data):
            lines.append("| %s | (not in %s: run scripts/train_models.py) | | | | | |"
                         % (name, a.cache))
            continue
        for label, build, method in TRAINED_ROWS:
            extra = list(build)
            cal = ""
            if method:
                path = os.path.join(tmp, "%s.%s.calib" % (name, method))
                run([a.kiln, "calibrate", model, "--data", calib_dir, "-o", path,
                     "--method", method])
                extra += ["--calibration", path]
                cal = method + (" 99.99" if method == "percentile" else "") + ", calib/ split"
            cmd = [sys.executable, os.path.join(HERE, "eval_accuracy.py"), a.kiln, model, data,
                   "--batch", "64", "--json"] + ["--build-arg=" + x for x in extra]
            r = json.loads(run(cmd))
            lines.append("| %s | %s | %s | %.2f%% (%d/%d) | %+.2f | %d/%d | %.3g |" % (
                name, label, cal, r["accuracy"], r["correct"], r["samples"],
                r["diff_points"] if r["diff_points"] is not None else float("nan"),
                r["torch_agreement"] or 0, r["samples"], r["max_abs_logit_diff"] or 0))
            print("  %s %s: %.2f%%" % (name, label, r["accuracy"]), file=sys.stderr)
    return lines


def worst_cosine(out):
    """The smallest cosine among the output lines of `kiln compare`."""
    cos = [float(m) for m in re.findall(r"cosine (-?[0-9.eE+-]+|nan)", out)]
    if not cos:
        raise RuntimeError("kiln compare printed no cosine:\n" + out)
    return min(cos), len(cos)


def exported_table(a, tmp):
    lines = ["| model | inputs | " + " | ".join(p + " cosine" for p in EXPORTED_PRECISIONS) +
             " |", "|---|---|" + "---:|" * len(EXPORTED_PRECISIONS)]
    for name in a.exported:
        model = os.path.join(a.cache, name + ".onnx")
        mdir = os.path.join(a.cache, name)
        if not os.path.isfile(model) or not os.path.isdir(os.path.join(mdir, "test_data_set_0")):
            lines.append("| %s | (not in %s: run scripts/export_models.py) |%s" % (
                name, a.cache, " |" * len(EXPORTED_PRECISIONS)))
            continue
        shapes = input_shapes(mdir)
        inputs = []
        d = os.path.join(mdir, "test_data_set_0")
        i = 0
        sys.path.insert(0, HERE)
        import eval_accuracy
        while os.path.isfile(os.path.join(d, "input_%d.pb" % i)):
            nm, _ = eval_accuracy.read_tensor_pb(os.path.join(d, "input_%d.pb" % i))
            inputs += ["--input", "%s=%s" % (nm, os.path.join(d, "input_%d.pb" % i))]
            i += 1
        cells = []
        for p in EXPORTED_PRECISIONS:
            extra = ["--precision", p]
            if p == "int8":
                cal = os.path.join(tmp, name + ".calib")
                run([a.kiln, "calibrate", model, "--data", d, "-o", cal] + shapes)
                extra += ["--calibration", cal]
            out = run([a.kiln, "compare", model, "--threads", str(a.threads)] + inputs + extra)
            c, n = worst_cosine(out)
            cells.append("%.7f" % c)
            print("  %s %s: cosine %.7f (worst of %d outputs)" % (name, p, c, n), file=sys.stderr)
        lines.append("| %s | %s | %s |" % (name, ", ".join(s.split("=")[1] for s in shapes[1::2]),
                                          " | ".join(cells)))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default=os.path.join(HERE, "..", "build", "kiln"))
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/kiln/models"))
    ap.add_argument("--trained", default=",".join(TRAINED))
    ap.add_argument("--exported", default=",".join(EXPORTED))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="write the tables here (default: standard output)")
    a = ap.parse_args()
    a.trained = [x for x in a.trained.split(",") if x]
    a.exported = [x for x in a.exported.split(",") if x]
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="kiln_prec.") as tmp:
        try:
            parts = ["Written by `scripts/precision_report.py` on %s UTC (%.0f s) with %s."
                     % (time.strftime("%Y-%m-%d %H:%M", time.gmtime()), 0, a.kiln), ""]
            if a.trained:
                parts += ["### Trained models: held-out top-1", ""] + trained_table(a, tmp) + [""]
            if a.exported:
                parts += ["### Exported models: cosine to the fp32 reference", ""] + \
                         exported_table(a, tmp) + [""]
        except RuntimeError as e:
            print("precision_report: %s" % e, file=sys.stderr)
            return 1
    parts[0] = parts[0].replace("(0 s)", "(%.0f s)" % (time.time() - t0))
    text = "\n".join(parts)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
