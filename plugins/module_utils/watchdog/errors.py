# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What goes wrong while the watchdog acts, by what the caller does about it. A bad config is not here:
it is `common.errors.InvalidInput` (field, rule, value), raised before anything acts."""

from __future__ import annotations

from typing import Optional


class WatchdogError(Exception):
    """The base of the area. `target` names the dependent resource concerned (`Deployment/kcm`), if any."""

    def __init__(self, message: str, target: Optional[str] = None):
        super().__init__(message)
        self.target = target


class ProbeError(WatchdogError):
    """The probe could not reach a verdict (API server unreachable, lease list refused): nothing is scaled.
    `throttled` is True for HTTP 429, after which the next probe waits for the throttling back-off."""

    def __init__(self, message: str, stage: str, throttled: bool = False):
        super().__init__(message)
        self.stage = stage
        self.throttled = throttled


class TargetNotFound(WatchdogError):
    """A mandatory dependent resource does not exist (an optional one is skipped, not raised)."""


class ScaleFailed(WatchdogError):
    """The API server refused a scale or annotation write of one target."""


class ScaleTimeout(WatchdogError):
    """A target did not reach its goal (status.replicas / readyReplicas) within the ScaleInfo timeout."""
