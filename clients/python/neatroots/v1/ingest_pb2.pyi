from neatroots.v1 import spans_pb2 as _spans_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PreCheckRequest(_message.Message):
    __slots__ = ("span", "known_spans", "timeout_ms")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    KNOWN_SPANS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    span: _spans_pb2.Span
    known_spans: int
    timeout_ms: int
    def __init__(self, span: _Optional[_Union[_spans_pb2.Span, _Mapping]] = ..., known_spans: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class PreCheckResponse(_message.Message):
    __slots__ = ("decision", "check_id", "finding_id", "title", "text")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    FINDING_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    decision: str
    check_id: str
    finding_id: str
    title: str
    text: str
    def __init__(self, decision: _Optional[str] = ..., check_id: _Optional[str] = ..., finding_id: _Optional[str] = ..., title: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class PreCheckPolicyRequest(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    def __init__(self, workflow: _Optional[str] = ...) -> None: ...

class PreCheckPolicyResponse(_message.Message):
    __slots__ = ("tools", "fail_closed", "timeout_ms")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    FAIL_CLOSED_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedScalarFieldContainer[str]
    fail_closed: bool
    timeout_ms: int
    def __init__(self, tools: _Optional[_Iterable[str]] = ..., fail_closed: bool = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ("events", "note_runs")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NOTE_RUNS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_spans_pb2.Event]
    note_runs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, events: _Optional[_Iterable[_Union[_spans_pb2.Event, _Mapping]]] = ..., note_runs: _Optional[_Iterable[str]] = ...) -> None: ...

class Rejected(_message.Message):
    __slots__ = ("index", "run_id", "span_id", "field", "reason")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    index: int
    run_id: str
    span_id: str
    field: str
    reason: str
    def __init__(self, index: _Optional[int] = ..., run_id: _Optional[str] = ..., span_id: _Optional[str] = ..., field: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ExportResponse(_message.Message):
    __slots__ = ("accepted", "rejected", "notes")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    rejected: _containers.RepeatedCompositeFieldContainer[Rejected]
    notes: _containers.RepeatedCompositeFieldContainer[Note]
    def __init__(self, accepted: _Optional[int] = ..., rejected: _Optional[_Iterable[_Union[Rejected, _Mapping]]] = ..., notes: _Optional[_Iterable[_Union[Note, _Mapping]]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class Note(_message.Message):
    __slots__ = ("id", "project", "run_id", "check_id", "finding_id", "kind", "title", "text", "at_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_ID_FIELD_NUMBER: _ClassVar[int]
    FINDING_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    project: str
    run_id: str
    check_id: str
    finding_id: str
    kind: str
    title: str
    text: str
    at_ms: float
    def __init__(self, id: _Optional[str] = ..., project: _Optional[str] = ..., run_id: _Optional[str] = ..., check_id: _Optional[str] = ..., finding_id: _Optional[str] = ..., kind: _Optional[str] = ..., title: _Optional[str] = ..., text: _Optional[str] = ..., at_ms: _Optional[float] = ...) -> None: ...
