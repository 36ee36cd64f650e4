# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runtime every loop shares: flags (settings), the loop registry (loops), leader election (leader),
metrics and health (metrics), JSON logs (logs), the handler context (runtime) and kopf's registry (operator)."""
