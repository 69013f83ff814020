"""Resume anchors: saved page-aligned and atomically, loaded by mapping, inside residency spans.

    from yeto_otel.anchors import load_resume_anchors, save_resume_anchors

torch is imported only when these functions run.
"""

from ._errors import AnchorLoadError, AnchorSaveError
from ._load import EAGER, EAGER_FALLBACK, MMAP
from ._resume import LOAD_MODES, ResumeAnchors, load_resume_anchors
from ._save import save_resume_anchors

__all__ = [
    "EAGER",
    "EAGER_FALLBACK",
    "LOAD_MODES",
    "MMAP",
    "AnchorLoadError",
    "AnchorSaveError",
    "ResumeAnchors",
    "load_resume_anchors",
    "save_resume_anchors",
]
