# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One JSON object per log line (time, level, logger, message, and the object concerned)."""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter


def setup(log_format: str = 'json', level: str = 'INFO') -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == 'json':
        handler.setFormatter(JsonFormatter('%(asctime)s %(levelname)s %(name)s %(message)s',
                                           rename_fields={'asctime': 'time', 'levelname': 'level', 'name': 'logger'},
                                           timestamp=False))
    else:
        handler.setFormatter(logging.Formatter('%(asctime)s %(levelname)s %(name)s: %(message)s'))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ('urllib3', 'botocore', 'boto3', 's3transfer', 'kubernetes', 'aiohttp.access'):
        logging.getLogger(noisy).setLevel(logging.WARNING)
