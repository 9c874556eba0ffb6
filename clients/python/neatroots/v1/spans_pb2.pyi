from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Usage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "total_tokens", "cost")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    input_tokens: float
    output_tokens: float
    total_tokens: float
    cost: float
    def __init__(self, input_tokens: _Optional[float] = ..., output_tokens: _Optional[float] = ..., total_tokens: _Optional[float] = ..., cost: _Optional[float] = ...) -> None: ...

class Span(_message.Message):
    __slots__ = ("run_id", "span_id", "parent_id", "type", "name", "tool", "input_json", "output_json", "error", "status", "start_ms", "end_ms", "usage", "model", "project", "workflow", "session_id", "attributes_json")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    END_MS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_JSON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    span_id: str
    parent_id: str
    type: str
    name: str
    tool: str
    input_json: str
    output_json: str
    error: str
    status: str
    start_ms: float
    end_ms: float
    usage: Usage
    model: str
    project: str
    workflow: str
    session_id: str
    attributes_json: str
    def __init__(self, run_id: _Optional[str] = ..., span_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., type: _Optional[str] = ..., name: _Optional[str] = ..., tool: _Optional[str] = ..., input_json: _Optional[str] = ..., output_json: _Optional[str] = ..., error: _Optional[str] = ..., status: _Optional[str] = ..., start_ms: _Optional[float] = ..., end_ms: _Optional[float] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., model: _Optional[str] = ..., project: _Optional[str] = ..., workflow: _Optional[str] = ..., session_id: _Optional[str] = ..., attributes_json: _Optional[str] = ...) -> None: ...

class ToolInfo(_message.Message):
    __slots__ = ("name", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class RunStart(_message.Message):
    __slots__ = ("run_id", "project", "workflow", "session_id", "system_prompt", "user_message", "tools", "ts_ms")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    USER_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TS_MS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    project: str
    workflow: str
    session_id: str
    system_prompt: str
    user_message: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolInfo]
    ts_ms: float
    def __init__(self, run_id: _Optional[str] = ..., project: _Optional[str] = ..., workflow: _Optional[str] = ..., session_id: _Optional[str] = ..., system_prompt: _Optional[str] = ..., user_message: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[ToolInfo, _Mapping]]] = ..., ts_ms: _Optional[float] = ...) -> None: ...

class RunEnd(_message.Message):
    __slots__ = ("run_id", "status", "final_output_json", "ts_ms")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FINAL_OUTPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    TS_MS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    status: str
    final_output_json: str
    ts_ms: float
    def __init__(self, run_id: _Optional[str] = ..., status: _Optional[str] = ..., final_output_json: _Optional[str] = ..., ts_ms: _Optional[float] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("span", "run_start", "run_end")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    RUN_START_FIELD_NUMBER: _ClassVar[int]
    RUN_END_FIELD_NUMBER: _ClassVar[int]
    span: Span
    run_start: RunStart
    run_end: RunEnd
    def __init__(self, span: _Optional[_Union[Span, _Mapping]] = ..., run_start: _Optional[_Union[RunStart, _Mapping]] = ..., run_end: _Optional[_Union[RunEnd, _Mapping]] = ...) -> None: ...
