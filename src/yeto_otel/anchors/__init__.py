"""Resume anchors: saved page-aligned and atomically, loaded by mapping, inside residency spans.

torch is imported only when these functions run.
"""

from .errors import AnchorLoadError
from .resume import ResumeAnchors, load_resume_anchors
from .save import save_resume_anchors

__all__ = ["AnchorLoadError", "ResumeAnchors", "load_resume_anchors", "save_resume_anchors"]
