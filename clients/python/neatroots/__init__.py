"""neatroots: the agent client for Python (start a run, record tool calls, receive notes, stop on a halt)."""
from neatroots.client import DroppedEventsError, ExportRejectedError, NeatrootsClient, Note, Run, RunHaltedError

__all__ = ["NeatrootsClient", "Run", "Note", "RunHaltedError", "ExportRejectedError", "DroppedEventsError"]
