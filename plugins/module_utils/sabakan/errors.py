# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors of the sabakan area: one base (SabakanError), subclasses by what the caller does about them.

* talking to sabakan: SabakanUnavailable (retry later), SabakanQueryError, SabakanResponseError;
* the generator's refusals (GeneratorError): NotAvailable, TooManyNonExistent, MissingMachine,
  ConstraintViolation - nothing was changed, and the hint says what to do;
* bad input, also `common.errors.InvalidInput` (`field`, `rule`, `value`): TemplateError, ConstraintsError,
  MachineError (generator inputs, so GeneratorError too), SabakanVariablesError, SourceError, FileError,
  OptionError, SpecError, RepairConfigError, ClusterConfigMapError;
* running CKE's repair procedures: RepairNotFinished.

The class names are stable because operators and CKE's tests match on them.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput


class SabakanError(Exception):
    """Base of every sabakan-area failure; the message says what was wrong and where."""

    def result(self) -> Dict[str, Any]:
        """What a module or the inventory reports besides the field and rule of bad input: `msg` led by the class
        name (operators and CKE's tests match on it) and `error` the class name."""
        name = type(self).__name__
        return {'msg': '%s: %s' % (name, self), 'error': name}


# --- talking to sabakan ---------------------------------------------------------------------------
class SabakanUnavailable(SabakanError):
    """sabakan could not be reached or is failing (refused, timeout, DNS, TLS, HTTP 5xx): retry later."""


class SabakanQueryError(SabakanError):
    """sabakan answered with GraphQL errors (bad query, unknown serial, forbidden transition)."""

    def __init__(self, message: str, messages: Optional[List[str]] = None):
        super().__init__(message)
        self.messages = messages or [message]


class SabakanResponseError(SabakanError):
    """sabakan answered, but not with what the schema promises (not JSON, wrong shape, bad field)."""


# --- the generator --------------------------------------------------------------------------------
class GeneratorError(SabakanError):
    """Base of every error the generator raises; nothing was changed when one is raised."""

    hint = ''

    def __str__(self) -> str:
        text = super().__str__()
        return f'{text}. {self.hint}' if self.hint and self.hint not in text else text


class NotAvailable(GeneratorError):
    """Too few healthy machines to satisfy the constraints."""

    hint = ('Add healthy machines to sabakan (or widen the query variables) '
            'or lower control-plane-count / minimum-workers.')


class TooManyNonExistent(GeneratorError):
    """Half or more of the control plane nodes vanished from sabakan: replacing them would break etcd quorum."""

    hint = ('Refusing to change the cluster: restore the missing machines in sabakan, '
            'or recover etcd quorum first and then edit the cluster file by hand.')


class MissingMachine(GeneratorError):
    """A node of the current cluster has no machine, so the template cannot be re-applied."""

    hint = 'Run an update first (it removes non-existent nodes), then apply the new template.'


class ConstraintViolation(GeneratorError):
    """The cluster that would stand after the plan does not satisfy the constraints (CKE's Constraints.Check)."""


# --- bad input (field, rule, value) ---------------------------------------------------------------
class TemplateError(GeneratorError, InvalidInput):
    """The cluster template (or a cluster file) is malformed."""


class ConstraintsError(GeneratorError, InvalidInput):
    """The constraints are malformed; `field` is the constraint's key ('' for the whole mapping)."""


class MachineError(GeneratorError, InvalidInput):
    """A machine from sabakan is malformed."""


class SabakanVariablesError(SabakanError, InvalidInput):
    """Query variables given by the user are malformed (`field` is their path: having.states[0]); nothing was sent."""


class SourceError(SabakanError, InvalidInput):
    """The options that say where machines, template and constraints come from do not fit together."""


class FileError(SabakanError, InvalidInput):
    """A file (cluster, template, queue) cannot be read, parsed or written; `field` names the file."""


class OptionError(SabakanError, InvalidInput):
    """A module option is malformed."""


class SpecError(SabakanError, InvalidInput):
    """A SabakanIntegration spec cannot be acted on; `field` is its path (spec.constraints.minimum-workers)."""


class RepairConfigError(SabakanError, InvalidInput):
    """CKE's `repair` configuration (repair procedures, limits) broke a rule; the field is its path in it."""


class RepairNotFinished(SabakanError):
    """`sabakan_repair state=run` stopped before its entry finished: a limit holds it (another repair runs) or
    run_timeout ran out. The queue file keeps the entry's progress; running again continues from there."""


class ClusterConfigMapError(SabakanError, InvalidInput):
    """The cluster ConfigMap holds something that is not a usable cluster; nothing is written over it."""
