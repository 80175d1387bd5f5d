"""Name normalisation phi (DESIGN §4): NFKC, casefold, punctuation and whitespace collapsed."""
from __future__ import annotations

import re
import unicodedata

_PUNCT_OR_SPACE = re.compile(r"[\W_]+", re.UNICODE)


def normalize_name(name: str) -> str:
    """Canonical name key: ``"  Google,  Inc. "`` -> ``"google inc"``.

    Unicode NFKC, casefold, every run of punctuation/whitespace becomes one space,
    stripped. Returns ``""`` for a name with no word characters.
    """
    s = unicodedata.normalize("NFKC", name).casefold()
    return _PUNCT_OR_SPACE.sub(" ", s).strip()
