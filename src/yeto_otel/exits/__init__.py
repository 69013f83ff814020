"""What a rank's death leaves behind and who reports it: a record per reporting process that
outlives it (`_layout`, `_record_file`, `_recorder`), the evidence of how it died (`_evidence`,
`_cause`), and the observer that reports each death once (`_observer`), started per process by
`_process_exits`. docs/faults.md, "When a rank dies"."""

from ._cause import Cause, ExitStatus, Verdict, decide
from ._layout import Header, RecordState, Slot
from ._observer import ExitObserver, Observer, ReportedExit
from ._phase import PHASE_SPANS, PhaseSpanProcessor
from ._process_exits import ProcessExits, note_step, process_exits, start_exit_records
from ._record_file import note_exit_status
from ._recorder import BEFORE_FIRST_STEP, BETWEEN_SPANS, ExitRecorder

__all__ = ["BEFORE_FIRST_STEP", "BETWEEN_SPANS", "Cause", "ExitObserver", "ExitRecorder",
           "ExitStatus", "Header", "Observer", "PHASE_SPANS", "PhaseSpanProcessor", "ProcessExits", "RecordState", "ReportedExit",
           "Slot", "Verdict", "decide", "note_exit_status", "note_step", "process_exits", "start_exit_records"]
