"""The Kubernetes API emulator lives with the lab (lab/kube_api.py, also used by `make lab` and `make demo`)."""

from __future__ import annotations

import os
import sys

LAB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'lab')
if LAB not in sys.path:
    sys.path.insert(0, LAB)

from kube_api import FidelityEmulator, KubeServer, load_yaml_documents, repo_path  # noqa: E402,F401  pylint: disable=wrong-import-position

__all__ = ['FidelityEmulator', 'KubeServer', 'load_yaml_documents', 'repo_path']
