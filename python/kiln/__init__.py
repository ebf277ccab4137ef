"""kiln: ONNX models in, fast CPU inference out.

    import kiln, numpy as np
    engine = kiln.build("model.onnx", shapes={"input": (1, 3, 224, 224)})
    engine.save("model.kiln")
    engine = kiln.load("model.kiln")          # an engine file or an ONNX model
    out = engine.run({"input": np.zeros((1, 3, 224, 224), np.float32)})

    sess = kiln.InferenceSession("model.onnx")  # ONNX Runtime's API (docs/PYTHON.md)
    probs, = sess.run(None, {sess.get_inputs()[0].name: x})

Errors raise kiln.Error subclasses (one per kn_status of the C API) carrying
kiln's one-line message.  docs/PYTHON.md describes the package.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _kiln
from ._kiln import (CancelledError, DtypeError, Error, FileError, InternalError,
                    InvalidArgumentError, LimitError, MissingError, OutOfMemoryError, ParseError,
                    ShapeError, UnsupportedError)

__version__ = _kiln.__version__

__all__ = [
    "build", "load", "read_tensor", "Engine", "TensorInfo", "Error", "InvalidArgumentError", "FileError",
    "ParseError", "UnsupportedError", "ShapeError", "DtypeError", "MissingError", "LimitError",
    "OutOfMemoryError", "InternalError", "CancelledError", "InferenceSession", "SessionOptions",
    "RunOptions", "NodeArg", "GraphOptimizationLevel", "ExecutionMode",
    "get_available_providers", "get_device", "__version__",
]

PathLike = Union[str, "os.PathLike[str]"]
Dims = Union[Sequence[int], str]


class TensorInfo:
    """An input or output of an Engine: name, numpy dtype (None for bfloat16, which numpy
    lacks), shape (a tuple with None for dynamic dims, or None when the rank is unknown),
    dim_params (the symbolic names of dynamic dims, None where unnamed) and kiln_dtype
    (kiln's dtype name)."""

    __slots__ = ("name", "dtype", "shape", "dim_params", "kiln_dtype")

    def __init__(self, name: str, dtype: Optional[np.dtype], shape: Optional[Tuple],
                 kiln_dtype: str, dim_params: Tuple):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.kiln_dtype = kiln_dtype
        self.dim_params = dim_params

    def __repr__(self) -> str:
        return "TensorInfo(name=%r, dtype=%s, shape=%r)" % (self.name, self.dtype, self.shape)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TensorInfo) and self.name == other.name
                and self.dtype == other.dtype and self.shape == other.shape)

    __hash__ = None  # type: ignore[assignment]


def _percentile(sorted_v: Sequence[float], p: float) -> float:
    """kn_cli_percentile: linear interpolation between order statistics (numpy's default),
    as `kiln bench` and `kiln profile` compute their percentiles."""
    n = len(sorted_v)
    idx = (n - 1) * p
    lo, hi = int(math.floor(idx)), int(math.ceil(idx))
    return float(sorted_v[lo] + (sorted_v[hi] - sorted_v[lo]) * (idx - lo))


_SEQ_WORDS = ("seq", "len", "token", "time", "step", "word")


def _default_dim(info: "TensorInfo", d: int) -> int:
    """The CLI's size of a dynamic dim nothing fixes (tools/kiln/session.c default_dim):
    the first is a batch (1); a later one named like a sequence, or any later dim of an
    integer input, 128; one named height or width 224; else 1."""
    p = (info.dim_params[d] or "").lower()
    if d > 0 and (any(w in p for w in _SEQ_WORDS) or info.dtype.kind in "iu"):
        return 128
    if d > 0 and ("height" in p or "width" in p):
        return 224
    return 1


def _dims_text(shape: Sequence[int]) -> str:
    return "x".join(str(int(d)) for d in shape)


class Engine(_kiln.Engine):
    """A built kiln model, ready to run: made by kiln.build() or kiln.load().

    The model is read-only and shared; each run takes a context (activation arena and
    thread pool) from a small pool inside the Engine, so several Python threads may call
    run() at once, each on its own context, with the GIL released during the run.
    ``threads`` sets the threads of each run (None: KILN_NUM_THREADS, else every CPU)."""

    __slots__ = ()

    @property
    def inputs(self) -> List[TensorInfo]:
        """The graph inputs (not initializers), in order."""
        return [TensorInfo(*x) for x in self._io(False)]

    @property
    def outputs(self) -> List[TensorInfo]:
        """The graph outputs, in order."""
        return [TensorInfo(*x) for x in self._io(True)]

    def _feed(self, inputs: Optional[Mapping[str, Any]], seed: int) -> Dict[str, np.ndarray]:
        """inputs completed with generated ones: floats uniform in [-1, 1), integers 0,
        bools True (the CLI's token-id and mask heuristics need the graph: give such
        inputs explicitly); dynamic dims sized as the CLI sizes them."""
        feed = dict(inputs or {})
        rng = np.random.default_rng(seed)
        for info in self.inputs:
            if info.name in feed:
                continue
            if info.shape is None:
                raise InvalidArgumentError("%s: input '%s' has an unknown rank: give it in "
                                           "inputs=" % (self.path, info.name))
            if info.dtype is None:
                raise UnsupportedError("%s: input '%s': cannot generate %s data" %
                                       (self.path, info.name, info.kiln_dtype))
            shape = tuple(d if d is not None else _default_dim(info, k)
                          for k, d in enumerate(info.shape))
            if info.dtype.kind == "f":
                feed[info.name] = rng.uniform(-1, 1, shape).astype(info.dtype)
            elif info.dtype.kind == "b":
                feed[info.name] = np.ones(shape, info.dtype)
            else:
                feed[info.name] = np.zeros(shape, info.dtype)
        return feed

    def _shapes_text(self, feed: Mapping[str, Any]) -> str:
        parts = ["%s=%s" % (i.name, _dims_text(np.shape(feed[i.name]))) for i in self.inputs]
        return " ".join(parts) if parts else "no inputs"

    def bench(self, inputs: Optional[Mapping[str, np.ndarray]] = None, *,
              runs: Optional[int] = None, duration: Optional[float] = None, warmup: int = 3,
              threads: Optional[int] = None, seed: int = 1) -> Dict[str, Any]:
        """Times runs as `kiln bench --json` does and returns its numbers as a dict.

        ``warmup`` untimed runs, then ``runs`` timed runs, or runs for ``duration``
        seconds, or by default at least 10 runs and 1 s.  Keys as the CLI's JSON:
        min_ms, mean_ms, p50_ms, p90_ms, p99_ms, max_ms (percentiles interpolated
        linearly between order statistics), throughput_qps (runs / their summed time),
        wall_s, threads, runs, warmup, inputs, peak_rss_bytes, load_ms, model_load_ms,
        build_ms, first_run_ms.  Inputs not given are generated (floats uniform in
        [-1, 1), integers 0, bools True)."""
        if runs is not None and duration is not None:
            raise InvalidArgumentError("kiln: bench: runs and duration exclude each other")
        feed = self._feed(inputs, seed)
        r = self._time_runs(feed, runs=runs or 0, duration=duration or 0.0, warmup=warmup,
                            threads=threads or 0)
        ms = np.sort(r["ms"])
        n = len(ms)
        total = float(ms.sum())
        times = self._times
        return {
            "model": self.path,
            "engine": self.is_engine,
            "threads": r["threads"],
            "runs": n,
            "warmup": warmup,
            "inputs": self._shapes_text(feed),
            "min_ms": float(ms[0]),
            "mean_ms": total / n,
            "p50_ms": _percentile(ms, 0.5),
            "p90_ms": _percentile(ms, 0.9),
            "p99_ms": _percentile(ms, 0.99),
            "max_ms": float(ms[-1]),
            "throughput_qps": n / (total / 1e3) if total > 0 else 0.0,
            "wall_s": r["wall_s"],
            "peak_rss_bytes": _kiln._peak_rss(),
            "load_ms": times["load_ms"] + times["build_ms"],
            "model_load_ms": times["load_ms"],
            "build_ms": times["build_ms"],
            "first_run_ms": r["first_run_ms"],
        }

    def profile(self, inputs: Optional[Mapping[str, np.ndarray]] = None, *, runs: int = 20,
                warmup: int = 3, threads: Optional[int] = None,
                seed: int = 1) -> Dict[str, Any]:
        """Profiles runs as `kiln profile --json` does and returns its numbers as a dict
        (format "kiln-profile"): latency_ms (mean, median, p90, p99, min, max of each run's
        wall time), steps (per step: its calling-thread span's mean, median, min and max
        in us over the runs, share of the steps' total, FLOPs, bytes, GFLOP/s and GB/s at
        the median, the IO model's predicted_us and bound, arena_live_bytes, heap_bytes),
        steps_total_us, steps_total_median_us, steps_cover and memory (arena_bytes,
        weights_bytes, peak_rss_bytes).  The trace and the HTML report stay with the
        CLI."""
        feed = self._feed(inputs, seed)
        r = self._profile_runs(feed, runs=runs, warmup=warmup, threads=threads or 0)
        nthreads = r["threads"]
        run_ms = r["run_ms"]
        sp = r["spans"]  # run, step, thread, start_ns, end_ns, heap_bytes
        main = sp[sp[:, 2] == 0]
        steps_ms = np.zeros(runs)
        np.add.at(steps_ms, main[:, 0], (main[:, 4] - main[:, 3]) * 1e-6)
        cover = float(np.mean(np.where(run_ms > 0, steps_ms / np.where(run_ms > 0, run_ms, 1),
                                       0)))
        n_steps = self.step_count
        stats = []
        for i in range(n_steps):
            mine = main[main[:, 1] == i]
            us = np.sort((mine[:, 4] - mine[:, 3]) * 1e-3)
            last = mine[mine[:, 0] == runs - 1]
            heap = int(last[-1, 5]) if len(last) else 0
            if len(us):
                stats.append((float(us.mean()), _percentile(us, 0.5), float(us[0]),
                              float(us[-1]), heap))
            else:
                stats.append((0.0, 0.0, 0.0, 0.0, heap))
        total_mean = sum(s[0] for s in stats)
        total_median = sum(s[1] for s in stats)
        steps = []
        timeline = []
        for i, (mean, median, lo, hi, heap) in enumerate(stats):
            si = self._step_info(i, nthreads)
            moved = si["bytes_read"] + si["bytes_written"]
            steps.append({
                "index": i, "name": si["name"], "op": si["op"],
                "onnx_nodes": [c for c in si["covers"].split(",") if c],
                "tactic": si["tactic"], "tiling": si["tiling"], "precision": si["precision"],
                "flops": si["flops"], "bytes_read": si["bytes_read"],
                "bytes_written": si["bytes_written"], "mean_us": mean, "median_us": median,
                "min_us": lo, "max_us": hi,
                "share": mean / total_mean if total_mean > 0 else 0.0,
                "gflops": si["flops"] / (median * 1e3) if median > 0 else 0.0,
                "gbs": moved / (median * 1e3) if median > 0 else 0.0,
                "predicted_us": si["predicted_us"], "bound": si["bound"],
                "intensity": si["intensity"], "arena_live_bytes": si["arena_live_bytes"],
                "heap_bytes": heap,
            })
            timeline.append({"step": i, "name": si["name"],
                             "arena_live_bytes": si["arena_live_bytes"], "heap_bytes": heap})
        ms = np.sort(run_ms)
        st = self.stats()
        return {
            "format": "kiln-profile", "version": 1, "model": self.path,
            "engine": self.is_engine, "inputs": self._shapes_text(feed), "threads": nthreads,
            "runs": runs, "warmup": warmup,
            "latency_ms": {"mean": float(run_ms.mean()), "median": _percentile(ms, 0.5),
                           "p90": _percentile(ms, 0.9), "p99": _percentile(ms, 0.99),
                           "min": float(ms[0]), "max": float(ms[-1])},
            "steps_total_us": total_mean, "steps_total_median_us": total_median,
            "steps_cover": cover, "steps": steps,
            "memory": {"arena_bytes": st["arena_bytes"], "weights_bytes": st["param_bytes"],
                       "peak_rss_bytes": _kiln._peak_rss(), "timeline": timeline},
        }


def _dims_spec(name: str, dims: Dims) -> str:
    if isinstance(dims, str):
        return "%s=%s" % (name, dims)
    return "%s=%s" % (name, _dims_text(dims))


def _shape_specs(shapes: Union[None, Mapping[str, Dims], Iterable[str]]) -> Optional[List[str]]:
    if shapes is None:
        return None
    if isinstance(shapes, Mapping):
        return [_dims_spec(k, v) for k, v in shapes.items()]
    return [str(s) for s in shapes]


def _profile_specs(profiles: Union[None, Mapping[str, Any], Iterable[str]]) -> Optional[List[str]]:
    if profiles is None:
        return None
    if isinstance(profiles, Mapping):
        out = []
        for k, v in profiles.items():
            if isinstance(v, str):
                out.append("%s=%s" % (k, v))
                continue
            if len(v) != 3:
                raise InvalidArgumentError(
                    "kiln: profiles[%r]: expected (min, opt, max) shapes, got %r" % (k, v))
            out.append("%s=%s" % (k, ":".join(_dims_text(s) for s in v)))
        return out
    return [str(s) for s in profiles]


_SIZE_SUFFIX = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _bytes(v: Union[None, int, str]) -> int:
    if v is None:
        return 0
    if isinstance(v, str):
        s = v.strip().upper().rstrip("B").rstrip("I")
        mul = _SIZE_SUFFIX.get(s[-1:], 1)
        try:
            return int(float(s[:-1] if mul > 1 else s) * mul)
        except ValueError:
            raise InvalidArgumentError("kiln: workspace: expected bytes such as 512M, got %r" % v)
    if v < 0:
        raise InvalidArgumentError("kiln: workspace must not be negative, got %d" % v)
    return int(v)


def build(model_path: PathLike, shapes: Union[None, Mapping[str, Dims], Iterable[str]] = None,
          profiles: Union[None, Mapping[str, Any], Iterable[str]] = None,
          precision: Optional[str] = None, workspace: Union[None, int, str] = None,
          disable_passes: Optional[Iterable[str]] = None, *, optimize: bool = True,
          reference_kernels: bool = False, tactics: Optional[str] = None,
          threads: Optional[int] = None, timing_cache: Optional[PathLike] = None) -> Engine:
    """Builds an ONNX model into an Engine, as `kiln build` does (without writing it:
    Engine.save does).

    shapes: fixed sizes of dynamic inputs, {"input": (1, 3, 224, 224)} or
      ["input=1x3x224x224"].
    profiles: dynamic ranges, {"input_ids": ((1, 8), (1, 128), (4, 512))} or
      ["input_ids=1x8:1x128:4x512"]; memory is planned for the largest.
    precision: "fp32" (default), "bf16", "fp16" or "best" (int8 needs a calibration:
      use `kiln calibrate` and `kiln build` for now).
    workspace: cap on the activation arena, bytes or "512M".
    disable_passes: optimization passes not to run (`kiln build --help` lists them).
    optimize=False skips every pass; reference_kernels=True runs the reference kernels;
    tactics "timed" or "heuristic"; threads: threads timing the tactics;
    timing_cache: a file of tactic timings to reuse and extend.
    The GIL is released while building."""
    return _kiln._load(
        os.fspath(model_path), build=True, shapes=_shape_specs(shapes),
        profiles=_profile_specs(profiles), precision=precision, workspace=_bytes(workspace),
        disable_passes=list(disable_passes) if disable_passes is not None else None,
        optimize=optimize, reference_kernels=reference_kernels, tactics=tactics,
        threads=threads or 0,
        timing_cache=os.fspath(timing_cache) if timing_cache is not None else None,
        cls=Engine)


def read_tensor(path: PathLike) -> np.ndarray:
    """Reads an ONNX TensorProto (.pb, as in ONNX's test data) or a NumPy .npy file
    (told apart by their contents), as `kiln run --input` does."""
    return _kiln._read_tensor(os.fspath(path))[0]


def load(path: PathLike, *, threads: Optional[int] = None) -> Engine:
    """Loads a kiln engine file, or an ONNX model which is then built with the default
    options (as `kiln run` does).  threads: threads of each run (None: the default)."""
    e = _kiln._load(os.fspath(path), build=True, cls=Engine)
    e.threads = threads
    return e


from .onnxruntime import (ExecutionMode, GraphOptimizationLevel, InferenceSession,  # noqa: E402
                          NodeArg, RunOptions, SessionOptions, get_available_providers,
                          get_device)
