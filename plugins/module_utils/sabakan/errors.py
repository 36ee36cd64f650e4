# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Generator errors; the class names are stable because operators and CKE's tests match on them."""

from __future__ import annotations


class GeneratorError(Exception):
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


class TemplateError(GeneratorError):
    """The cluster template is malformed."""


class ConstraintsError(GeneratorError):
    """The constraints are malformed."""


class MachineError(GeneratorError):
    """A machine from sabakan is malformed."""
