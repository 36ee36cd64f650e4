# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes API failures, by what the caller does about them."""

from __future__ import annotations


class KubeError(Exception):
    """The API server refused or failed a request; `status` is the HTTP code (0: not reached)."""

    def __init__(self, message: str, status: int = 0, reason: str = ''):
        super().__init__(message)
        self.status = status
        self.reason = reason


class KubeUnavailable(KubeError):
    """The API server could not be reached or answered 5xx."""


class BadAnswer(KubeError):
    """The server answered, but not as a Kubernetes API server does (an object that is not a mapping, a list whose
    items are not objects): a proxy, a captive portal or another service at that address."""


class NotFound(KubeError):
    """404: the object (or resource) does not exist."""


class AlreadyExists(KubeError):
    """409 on create: an object of that name exists."""


class Conflict(KubeError):
    """409 on update: the object changed since it was read (resourceVersion precondition)."""


class Invalid(KubeError):
    """422: the object or patch was rejected by validation."""
