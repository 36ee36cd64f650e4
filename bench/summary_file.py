"""Where every benchmark leaves its figures: one JSON file under bench/results, so runs can be compared later."""
from __future__ import annotations

import json
import os
from typing import Any, Dict


def write_summary(path: str, summary: Dict[str, Any]) -> None:
    os.makedirs(os.path.dirname(path) or '.', exist_ok=True)
    with open(path, 'w') as f:
        json.dump(summary, f, indent=2)
    print('summary written to %s' % path)
