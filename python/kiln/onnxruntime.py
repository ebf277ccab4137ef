"""ONNX Runtime's Python inference API on kiln: a script written for ONNX Runtime's CPU
inference runs by changing ``import onnxruntime as ort`` to ``import kiln as ort``.

What is supported and what raises is listed in docs/PYTHON.md ("ONNX Runtime
compatibility"): options that would change what a run does and that kiln cannot honour
raise UnsupportedError rather than being ignored; options with no effect on results
(log levels, memory arena switches) are accepted.
"""
from __future__ import annotations

import enum
import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from . import _kiln
from ._kiln import InvalidArgumentError, UnsupportedError

# ONNX Runtime's element type names, by kiln dtype name
_ORT_TYPES = {
    "float32": "tensor(float)", "float64": "tensor(double)", "float16": "tensor(float16)",
    "bfloat16": "tensor(bfloat16)", "int8": "tensor(int8)", "int16": "tensor(int16)",
    "int32": "tensor(int32)", "int64": "tensor(int64)", "uint8": "tensor(uint8)",
    "uint16": "tensor(uint16)", "uint32": "tensor(uint32)", "uint64": "tensor(uint64)",
    "bool": "tensor(bool)", "string": "tensor(string)",
}

CPU = "CPUExecutionProvider"


def get_available_providers() -> List[str]:
    """kiln runs on the CPU: ["CPUExecutionProvider"]."""
    return [CPU]


def get_all_providers() -> List[str]:
    return [CPU]


def get_device() -> str:
    return "CPU"


class GraphOptimizationLevel(enum.IntEnum):
    """ONNX Runtime's levels.  kiln has one optimizer: ORT_DISABLE_ALL runs the graph as
    imported; every other level runs all of kiln's passes."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    """ONNX Runtime's SessionOptions.  Honoured: intra_op_num_threads (threads of a run;
    0: kiln's default), graph_optimization_level.  Accepted with no effect on results:
    inter_op_num_threads, log_severity_level, log_verbosity_level, logid,
    enable_cpu_mem_arena, enable_mem_pattern, enable_mem_reuse,
    use_deterministic_compute (kiln is deterministic for a given thread count).  Refused
    (UnsupportedError when the session is made): execution_mode ORT_PARALLEL,
    enable_profiling (use Engine.profile), optimized_model_filepath (use kiln.build and
    Engine.save), session config entries, free dimension overrides, custom op libraries,
    initializers."""

    __slots__ = ("intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level",
                 "execution_mode", "execution_order", "log_severity_level",
                 "log_verbosity_level", "logid", "enable_cpu_mem_arena", "enable_mem_pattern",
                 "enable_mem_reuse", "use_deterministic_compute", "enable_profiling",
                 "profile_file_prefix", "optimized_model_filepath", "_refused")

    def __init__(self) -> None:
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = 0
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.optimized_model_filepath = ""
        self._refused: List[str] = []

    def _refuse(self, what: str) -> None:
        raise UnsupportedError("kiln: SessionOptions.%s is not supported by kiln" % what)

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._refuse("add_session_config_entry(%r, %r)" % (key, value))

    def get_session_config_entry(self, key: str) -> str:
        raise UnsupportedError("kiln: SessionOptions has no config entries (asked for %r)" % key)

    def add_free_dimension_override_by_name(self, name: str, value: int) -> None:
        self._refuse("add_free_dimension_override_by_name(%r, %d) (kiln.build(shapes=...) "
                     "fixes input shapes)" % (name, value))

    def add_free_dimension_override_by_denotation(self, name: str, value: int) -> None:
        self._refuse("add_free_dimension_override_by_denotation(%r, %d)" % (name, value))

    def register_custom_ops_library(self, path: str) -> None:
        self._refuse("register_custom_ops_library(%r)" % path)

    def add_initializer(self, name: str, value: Any) -> None:
        self._refuse("add_initializer(%r)" % name)

    def add_external_initializers(self, names: Any, values: Any) -> None:
        self._refuse("add_external_initializers")

    def _check(self) -> None:
        if self.execution_mode != ExecutionMode.ORT_SEQUENTIAL:
            self._refuse("execution_mode = ORT_PARALLEL (kiln runs the graph's steps in "
                         "order, each on intra_op_num_threads threads)")
        if self.enable_profiling:
            self._refuse("enable_profiling (kiln.load(path).profile() returns the per-step "
                         "profile; `kiln profile` writes traces)")
        if self.optimized_model_filepath:
            self._refuse("optimized_model_filepath (kiln writes engines: "
                         "kiln.build(path).save(...))")
        if not isinstance(self.intra_op_num_threads, int) or self.intra_op_num_threads < 0:
            raise InvalidArgumentError("kiln: SessionOptions.intra_op_num_threads must be an "
                                       "int >= 0, got %r" % (self.intra_op_num_threads,))
        if int(self.graph_optimization_level) not in (0, 1, 2, 99):
            raise InvalidArgumentError("kiln: SessionOptions.graph_optimization_level: "
                                       "unknown level %r" % (self.graph_optimization_level,))


class RunOptions:
    """ONNX Runtime's RunOptions: log settings and run_tag are accepted; terminate=True
    (cancel the runs of a session from another thread) is refused."""

    __slots__ = ("log_severity_level", "log_verbosity_level", "logid", "run_tag", "terminate",
                 "only_execute_path_to_fetches")

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False

    def add_run_config_entry(self, key: str, value: str) -> None:
        raise UnsupportedError("kiln: RunOptions.add_run_config_entry(%r) is not supported" %
                               key)


class NodeArg:
    """An input or output as ONNX Runtime describes it: name, type ("tensor(float)") and
    shape (a list: ints, the dim_param name of a named dynamic dim, None for an unnamed
    one)."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, name: str, type: str, shape: Optional[List[Union[int, str, None]]]):
        self.name = name
        self.type = type
        self.shape = shape

    def __repr__(self) -> str:
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


def _node_arg(info: Any) -> NodeArg:
    shape = None
    if info.shape is not None:
        shape = [d if d is not None else p for d, p in zip(info.shape, info.dim_params)]
    return NodeArg(info.name, _ORT_TYPES.get(info.kiln_dtype, "tensor(%s)" % info.kiln_dtype),
                   shape)


def _check_providers(providers: Optional[Sequence[Any]],
                     provider_options: Optional[Sequence[Mapping[str, Any]]]) -> None:
    if providers is None:
        return
    if isinstance(providers, str):
        providers = [providers]
    opts = list(provider_options) if provider_options is not None else []
    if provider_options is not None and len(opts) != len(providers):
        raise InvalidArgumentError("kiln: provider_options must have one dict per provider")
    for k, p in enumerate(providers):
        name, po = (p[0], p[1]) if isinstance(p, (tuple, list)) else (p, {})
        if opts:
            po = dict(po, **opts[k])
        if name != CPU:
            raise UnsupportedError(
                "kiln: execution provider %r is not supported: kiln runs on the CPU "
                "(providers=['CPUExecutionProvider'] or None)" % (name,))
        if po:
            raise UnsupportedError("kiln: CPUExecutionProvider options %r are not supported"
                                   % (dict(po),))


class InferenceSession:
    """ONNX Runtime's InferenceSession on a kiln Engine.

    path_or_bytes: an ONNX model (built in memory with kiln's optimizations, as
    kiln.load does), a kiln engine file, or the serialized bytes of an ONNX model.
    sess_options: a SessionOptions or None.  providers: None or CPUExecutionProvider
    only; anything else raises UnsupportedError."""

    def __init__(self, path_or_bytes: Union[str, bytes, "os.PathLike[str]"],
                 sess_options: Optional[SessionOptions] = None,
                 providers: Optional[Sequence[Any]] = None,
                 provider_options: Optional[Sequence[Mapping[str, Any]]] = None,
                 **kwargs: Any) -> None:
        from . import Engine  # the package imports this module at its end
        if kwargs:
            raise UnsupportedError("kiln: InferenceSession arguments %s are not supported" %
                                   ", ".join(sorted(kwargs)))
        if sess_options is not None and not isinstance(sess_options, SessionOptions):
            raise InvalidArgumentError("kiln: sess_options must be a kiln.SessionOptions, got "
                                       "%s" % type(sess_options).__name__)
        opts = sess_options if sess_options is not None else SessionOptions()
        opts._check()
        _check_providers(providers, provider_options)
        optimize = int(opts.graph_optimization_level) != 0
        if isinstance(path_or_bytes, (bytes, bytearray)):
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "model.onnx")
                with open(path, "wb") as f:
                    f.write(path_or_bytes)
                self._engine = _kiln._load(path, build=True, optimize=optimize, cls=Engine)
            self._model_path = None
        else:
            self._model_path = os.fspath(path_or_bytes)
            self._engine = _kiln._load(self._model_path, build=True, optimize=optimize,
                                       cls=Engine)
        self._engine.threads = opts.intra_op_num_threads or None
        self._sess_options = opts
        self._inputs = [_node_arg(i) for i in self._engine.inputs]
        self._outputs = [_node_arg(o) for o in self._engine.outputs]
        self._out_index = {o.name: k for k, o in enumerate(self._outputs)}

    @property
    def engine(self) -> Any:
        """The kiln Engine underneath (bench, profile, save)."""
        return self._engine

    def get_inputs(self) -> List[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> List[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        return []

    def get_providers(self) -> List[str]:
        return [CPU]

    def get_provider_options(self) -> Dict[str, Dict[str, str]]:
        return {CPU: {}}

    def set_providers(self, providers: Optional[Sequence[Any]] = None,
                      provider_options: Optional[Sequence[Mapping[str, Any]]] = None) -> None:
        _check_providers(providers, provider_options)

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def run(self, output_names: Optional[Sequence[str]], input_feed: Mapping[str, Any],
            run_options: Optional[RunOptions] = None) -> List[np.ndarray]:
        """Runs the model: input_feed {name: numpy.ndarray}; returns the outputs named in
        output_names (None or empty: all, in the model's order) as a list of arrays."""
        if run_options is not None:
            if not isinstance(run_options, RunOptions):
                raise InvalidArgumentError("kiln: run_options must be a kiln.RunOptions")
            if run_options.terminate:
                raise UnsupportedError("kiln: RunOptions.terminate is not supported")
        outs = self._engine._run_tuple(input_feed)
        if not output_names:
            return list(outs)
        res = []
        for name in output_names:
            k = self._out_index.get(name)
            if k is None:
                raise InvalidArgumentError("%s: the model has no output named %r" %
                                           (self._engine.path, name))
            res.append(outs[k])
        return res

    def run_with_iobinding(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedError("kiln: IO binding is not supported; run() reads C-contiguous "
                               "inputs in place already")

    def io_binding(self) -> None:
        raise UnsupportedError("kiln: IO binding is not supported; run() reads C-contiguous "
                               "inputs in place already")

    def run_with_ort_values(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedError("kiln: OrtValue is not supported; pass numpy arrays to run()")

    def end_profiling(self) -> str:
        raise UnsupportedError("kiln: session profiling is not supported; use "
                               "session.engine.profile()")
