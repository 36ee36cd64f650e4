# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Go text/template subset for notification messages: fields, Go-name mapping, functions, control flow, errors."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import TemplateError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotemplate import (
    MISSING, GoTime, Struct, printf, render)

NODE = {'apiVersion': 'v1', 'kind': 'Node',
        'metadata': {'name': 'n1', 'uid': 'u-1', 'labels': {'zone': 'a', 'cloud.sap/maintenance-profile': 'flatcar'},
                     'annotations': {}},
        'spec': {'podCIDR': '10.0.0.0/24', 'unschedulable': True},
        'status': {'nodeInfo': {'kubeletVersion': 'v1.31.2', 'osImage': 'Flatcar'},
                   'conditions': [{'type': 'Ready', 'status': 'True'}, {'type': 'DiskPressure', 'status': 'False'}]}}


def data(**extra):
    fields = {'State': 'in-maintenance', 'Node': NODE,
              'Profile': Struct({'Current': 'flatcar', 'Last': 'k8s'}, text='flatcar', type_name='plugin.ProfileInfo'),
              'LastTransition': GoTime(1714557600 * 10 ** 9), 'InMaintenance': True, 'LogDetails': False}
    fields.update(extra)
    return Struct(fields, type_name='plugin.Parameters')


@pytest.mark.parametrize('template, out', [
    ('plain text', 'plain text'),
    ('{{ .State }}', 'in-maintenance'),
    ('{{.Node.Name}} in {{ .State }}', 'n1 in in-maintenance'),
    ('{{ .Node.ObjectMeta.Name }}', 'n1'),                             # embedded ObjectMeta, both ways
    ('{{ .Node.UID }}', 'u-1'),
    ('{{ .Node.Kind }}/{{ .Node.APIVersion }}', 'Node/v1'),
    ('{{ .Node.Spec.PodCIDR }} {{ .Node.Spec.Unschedulable }}', '10.0.0.0/24 true'),
    ('{{ .Node.Status.NodeInfo.KubeletVersion }} on {{ .Node.Status.NodeInfo.OSImage }}', 'v1.31.2 on Flatcar'),
    ('{{ .Node.Labels.zone }}', 'a'),
    ('{{ index .Node.Labels "cloud.sap/maintenance-profile" }}', 'flatcar'),
    ('{{ .Node.Labels.missing }}', '<no value>'),
    ('{{ .Profile }} {{ .Profile.Current }} {{ .Profile.Last }}', 'flatcar flatcar k8s'),
    ('{{ .LastTransition }}', '2024-05-01 10:00:00 +0000 UTC'),
    ('{{ .InMaintenance }}', 'true'),
    ('{{ if eq .State "in-maintenance" }}down{{ else }}up{{ end }}', 'down'),
    ('{{ if eq .State "operational" }}up{{ else if eq .State "in-maintenance" }}down{{ else }}?{{ end }}', 'down'),
    ('{{ if and .InMaintenance (not .LogDetails) }}y{{ end }}', 'y'),
    ('{{ if or .LogDetails .Node.Labels.missing }}y{{ else }}n{{ end }}', 'n'),
    ('{{ eq .State "a" "b" "in-maintenance" }}', 'true'),
    ('{{ range .Node.Status.Conditions }}{{ .Type }}={{ .Status }};{{ end }}', 'Ready=True;DiskPressure=False;'),
    ('{{ range $k, $v := .Node.Labels }}{{ $k }}:{{ $v }} {{ end }}', 'cloud.sap/maintenance-profile:flatcar zone:a '),
    ('{{ range .Node.Spec.Taints }}x{{ else }}no taints{{ end }}', 'no taints'),
    ('{{ with .Node.Status.NodeInfo }}{{ .KubeletVersion }}{{ end }}', 'v1.31.2'),
    ('{{ $n := .Node.Name }}{{ $n }}-{{ $.State }}', 'n1-in-maintenance'),
    ('{{ len .Node.Status.Conditions }}', '2'),
    ('{{ printf "%s is %d%%" .Node.Name 5 }}', 'n1 is 5%'),
    ('{{ .Node.Name | printf "node=%q" }}', 'node="n1"'),
    ('{{ print "a" 1 2 "b" }}', 'a1 2b'),
    ('{{ "<b>" | html }} {{ urlquery "a b&c" }}', '&lt;b&gt; a+b%26c'),
    ('a  {{- " b " -}}  c', 'a b c'),
    ('x{{/* a comment */}}y', 'xy'),
    ('x {{- /* trimmed */ -}} y', 'xy'),
    ('{{ `raw {{ string }}` }}', 'raw {{ string }}'),
    ('{{ 3 }} {{ -1 }} {{ true }}', '3 -1 true'),
    ('{{ lt 1 2 }} {{ ge "b" "a" }} {{ ne 1 1 }}', 'true true false'),
])
def test_render(template, out):
    assert render(template, data()) == out


@pytest.mark.parametrize('template, message', [
    ('{{ .Nope }}', "can't evaluate field Nope in type plugin.Parameters"),
    ('{{ .Profile.Other }}', "can't evaluate field Other in type plugin.ProfileInfo"),
    ('{{ .State', 'unclosed action'),
    ('{{ if .State }}x', 'has no {{end}}'),
    ('{{ end }}', 'unexpected {{end}}'),
    ('{{ nosuchfunc 1 }}', 'function "nosuchfunc" not defined'),
    ('{{ template "x" }}', 'is not supported'),
    ('{{ .State.Length }}', "can't evaluate field Length in type string"),
    ('{{ lt 1 "a" }}', 'incompatible types for comparison'),
    ('{{ index .Node.Status.Conditions 5 }}', 'index out of range'),
    ('{{ $undefined }}', 'undefined variable "$undefined"'),
    ('{{ "a" "b" }}', "can't give argument to non-function"),
    ('line1\n{{ ) }}', 'line 2'),
])
def test_errors_are_template_errors_with_a_position(template, message):
    with pytest.raises(TemplateError) as err:
        render(template, data())
    assert message in str(err.value)


def test_no_python_attribute_access():
    class Secret:
        password = 'hunter2'
    with pytest.raises(TemplateError, match="can't evaluate field password in type Secret"):
        render('{{ .Obj.password }}', {'Obj': Secret()})
    with pytest.raises(TemplateError):
        render('{{ .State.__class__ }}', data())


def test_output_and_missing_values():
    assert render('{{ .Missing.Deeper }}', {'Missing': MISSING}) == '<no value>'
    assert render('{{ .A }}', {'A': None}) == '<nil>'
    assert render('{{ .M }}', {'M': {'b': 1, 'a': [1, 'x']}}) == 'map[a:[1 x] b:1]'


@pytest.mark.parametrize('fmt, args, out', [
    ('%v|%s', ('a', 1), 'a|1'),
    ('%5s|%-3d|', ('ab', 7), '   ab|7  |'),
    ('%.2f', (1.239,), '1.24'),
    ('%x', (255,), 'ff'),
    ('%t', (True,), 'true'),
    ('%d', ('x',), '%!d(string=x)'),
    ('%s %s', ('a',), 'a %!s(MISSING)'),
    ('%s', ('a', 'b'), 'a%!(EXTRA string=b)'),
])
def test_printf_follows_go(fmt, args, out):
    assert printf(fmt, *args) == out
