#!/usr/bin/env python3
"""Regenerates jinja_features.json: Jinja feature cases for tests/unit/chat_template_test.cpp,
with the expected output (or error) computed by Python jinja2 under Hugging Face's chat-template
settings. Needs only `pip install jinja2` (3.1.x); pith itself never runs Python.

    python3 make_jinja_features.py > jinja_features.json
"""
import datetime
import json
import random
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=["jinja2.ext.loopcontrols"])


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: datetime.datetime.now().strftime(f)

C = []
def c(_n, _t, **v): C.append([_n, _t, v])
# whitespace control
c("ws_trim_lstrip", "A\n  {% if true %}\n    B\n  {% endif %}\nC\n")
c("ws_var_not_trimmed", "A\n  {{ 'x' }}\nB")
c("ws_minus", "A   {%- if true -%}   B   {%- endif -%}   C")
c("ws_var_minus", "A \n {{- 'x' -}} \n B")
c("ws_plus_disables_lstrip", "A\n  {%+ if true %}B{% endif %}")
c("ws_plus_disables_trim", "A{% if true +%}\nB{% endif %}")
c("ws_comment", "A\n  {# note #}\nB {#- x -#} C\n{# c #}D")
c("ws_trailing_newline", "line\n\n")
c("ws_crlf", "a\r\nb\rc{% if true %}\r\nd{% endif %}")
c("ws_inline_block_keeps_indent", "  x {% if true %}y{% endif %}\n")
c("ws_raw", "{% raw %}{{ not evaluated }}{% endraw %}!")
# literals and operators
c("lit_numbers", "{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 3 / 2 }} {{ 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1_000 }} {{ 0x1f }}")
c("lit_float_repr", "{{ 1e-5 }} {{ 1e16 }} {{ 123456789012345678.0 }} {{ 0.0001 }} {{ 2.5e-7 }} {{ 1/3 }}")
c("lit_bool_none", "{{ true }} {{ False }} {{ none }} {{ None }}")
c("lit_strings", "{{ 'a\\'b' }} {{ \"q\\\"r\" }} {{ 'tab\\tnl\\n' }} {{ 'u\\u00e9' }} {{ 'ab' 'cd' }}")
c("lit_list_dict_repr", "{{ [1, 'a', none, true, 1.0] }} {{ {'k': 'v', 'n': [1]} }} {{ \"it's\" }} {{ ['it\\'s'] }}")
c("concat_tilde", "{{ 'a' ~ 1 ~ none ~ undefined_var ~ [1] }}")
c("string_plus", "{{ 'a' + 'b' }} {{ [1] + [2, 3] }} {{ 'ab' * 3 }}")
c("compare_chain", "{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ {'a': 1} == {'a': 1} }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }}")
c("in_not_in", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'cat' }} {{ 'x' in undefined_var }}")
c("and_or_values", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or [] }} {{ not 0 }} {{ not 'a' }}")
c("cond_expr", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}] {{ 1 if false else 2 if true else 3 }}")
c("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 'a' ~ 2 * 3 }} {{ ('a' ~ 1) + 'b' }} {{ 'ab' | upper + 'c' }} {{ not 1 == 2 }}")
# subscripts and slices
c("subscript", "{{ xs[0] }} {{ xs[-1] }} {{ d['k'] }} {{ d.k }} {{ xs.1 }} [{{ xs[10] }}] [{{ d.missing }}]", xs=[1,2,3], d={"k":"v"})
c("slices", "{{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[5:] }} {{ 'héllo'[::-1] }} {{ 'abcdef'[1:4] }} {{ 'abc'[-1] }}", xs=[1,2,3,4])
# tests
c("tests", "{{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ n is none }} {{ x is string }} {{ 1 is number }} {{ 1.5 is float }} {{ 1 is integer }} {{ true is boolean }} {{ d is mapping }} {{ xs is iterable }} {{ 'a' is iterable }} {{ xs is sequence }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ x is not none }} {{ x is equalto 's' }} {{ 'abc' is lower }} {{ true is true }} {{ 1 is true }} {{ x is in ['s'] }} {{ 2 is gt 1 }} {{ range is callable }}", x="s", n=None, d={}, xs=[1])
# loops
c("loop_vars", "{% for x in xs %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }}/{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}", xs=["a","b","c"])
c("loop_else", "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1] %}{{ x }}{% else %}empty{% endfor %}")
c("loop_filter", "{% for x in xs if x % 2 == 0 %}{{ x }}:{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}", xs=[1,2,3,4,5,6])
c("loop_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{% endfor %}")
c("loop_unpack_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | items %}{{ k }}{% endfor %}{% for k in d %}{{ k }}{% endfor %}", d={"b":1,"a":2})
c("loop_string_and_dict", "{% for ch in 'hé!' %}[{{ ch }}]{% endfor %}")
c("loop_scoping", "{% set x = 0 %}{% for i in range(3) %}[{{ x }}]{% set x = i + 10 %}({{ x }}){% endfor %}{{ x }}")
c("loop_nested", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }} {% endfor %}")
c("loop_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}")
c("range_forms", "{{ range(3) | list }} {{ range(1, 4) | list }} {{ range(10, 0, -3) | list }}")
# set / namespace
c("set_basic", "{% set a = 1 %}{% set b, c = 2, 3 %}{{ a }}{{ b }}{{ c }}{% if true %}{% set a = 5 %}{% endif %}{{ a }}")
c("set_block", "{% set body %}Hello {{ name }}{% endset %}[{{ body }}]{% set up | upper %}abc{% endset %}{{ up }}", name="W")
c("namespace", "{% set ns = namespace(count=0, found=false) %}{% for x in [1, 2, 3] %}{% set ns.count = ns.count + x %}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}")
c("namespace_empty", "{% set ns = namespace() %}{% set ns.index = 0 %}{% for m in ms %}{% set ns.index = ns.index + 1 %}{% endfor %}{{ ns.index }}", ms=[1,2])
# macros
c("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(name='C', punct='.') }}")
c("macro_scope", "{% set g = 'G' %}{% macro m(x) %}{{ g }}{{ x }}{% set inner = 1 %}{% endmacro %}{% for i in [1] %}{{ m(i) }}{% endfor %}[{{ inner }}]")
# filters
c("f_trim_case", "[{{ '  a b \\n' | trim }}] {{ 'hello world' | title }} {{ 'hELLO' | capitalize }} {{ 'Ab' | upper }}{{ 'Ab' | lower }} [{{ 'xxaxx' | trim('x') }}]")
c("f_length", "{{ 'héllo' | length }} {{ [1, 2] | length }} {{ {'a': 1} | length }} {{ undefined_var | length }} {{ [1, 2, 3] | count }}")
c("f_tojson", "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é\"<>&\\n' | tojson }}|{{ [] | tojson(indent=4) }}|{{ {'b': 1, 'a': [1.5, none, true]} | tojson(sort_keys=true) }}|{{ x | tojson(separators=(',', ':')) }}|{{ 'é' | tojson(ensure_ascii=true) }}", d={"name": "café", "args": {"z": 1, "a": [1, 2]}, "f": 0.5}, x={"a": [1, 2]})
c("f_replace_join", "{{ 'a-b-c' | replace('-', '+') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ [1, 2, 3] | join(', ') }} {{ ['x', 'y'] | join }} {{ users | join(', ', attribute='name') }}", users=[{"name":"u1"},{"name":"u2"}])
c("f_default", "{{ undefined_var | default('dflt') }} {{ '' | default('e') }} {{ '' | default('e', true) }} {{ none | default('n') }} {{ x | d('z') }}", x="set")
c("f_first_last_list", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} {{ 'ab' | list }} {{ {'k': 1} | list }} {{ [] | first }}")
c("f_items_string_int", "{{ {'a': 1} | items | list }} {{ 12 | string + 'x' }} {{ '42' | int + 1 }} {{ '4.7' | int }} {{ 'x' | int }} {{ 3.9 | int }} {{ '2.5' | float }} {{ [1] | string }}")
c("f_select", "{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ ms | rejectattr('role', 'equalto', 'user') | list | length }} {{ ms | selectattr('tool') | list | length }} {{ [0, 1, 2, 3] | select('odd') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ [1, 2, 3] | reject('equalto', 2) | list }}", ms=[{"role":"user","content":"u1"},{"role":"assistant","content":"a1","tool":1},{"role":"user","content":"u2"}])
c("f_map", "{{ ['a', 'b'] | map('upper') | list }} {{ ['1', '2'] | map('int') | sum }} {{ ms | map(attribute='x', default='?') | join }}", ms=[{"x":"1"},{}])
c("f_misc", "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ [1, 2, 1, 3] | unique | list }} {{ [1, 5, 3] | max }} {{ [1, 5, 3] | min }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ [1, 2] | reverse | list }} {{ 'abc' | reverse }} {{ {'b': 1, 'a': 2} | dictsort }} {{ 'one two  three' | wordcount }} {{ '<a>' | e }}")
c("f_indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}")
c("f_map_sort_attr", "{{ ms | sort(attribute='n') | map(attribute='n') | list }}", ms=[{"n":3},{"n":1},{"n":2}])
# string & dict methods
c("str_methods", "[{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ 'xxhixx'.strip('x') }}] {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ 'Hi'.upper() }}{{ 'Hi'.lower() }} {{ 'a-b'.replace('-', '_') }} {{ 'hello world'.title() }} {{ 'abcabc'.find('c') }} {{ 'abc'.count('b') }} {{ '-'.join(['a', 'b']) }} {{ 'x\\ny'.splitlines() }} {{ '12'.isdigit() }}")
c("dict_methods", "{{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d['items'] if 'items' in d else 'no' }}", d={"a":1,"b":[2]})
c("dict_literal_and_in", "{% set d = {'role': 'user', 'n': 1 + 1} %}{{ d.role }} {{ d['n'] }} {{ 'role' in d }} {{ d | tojson }}")
# undefined semantics
c("undefined_semantics", "[{{ nope }}] {{ nope is defined }} {{ not nope }} [{{ nope | default('d') }}] {% for x in nope %}x{% endfor %}[{% if nope %}t{% else %}f{% endif %}] {{ d.nope is defined }} {{ nope == nope }}", d={})
c("strftime_defined", "{{ strftime_now is defined }} {{ raise_exception is defined }} {{ namespace is defined }}")
# errors
c("err_undefined_attr", "{{ d.a.b }}", d={})
c("err_undefined_name_attr", "line1\n{{ nope.attr }}")
c("err_str_plus_none", "{{ 'a' + n }}", n=None)
c("err_raise", "{{ raise_exception('Bad roles: ' ~ 3) }}")
c("err_iterate_none", "{% for x in n %}{% endfor %}", n=None)
c("err_div_zero", "{{ 1 / 0 }}")
c("tuple_repr", "{{ (1, 2) }} {{ (1,) }} {{ () }} {% set t = 1, 'a' %}{{ t }} {{ t | tojson }} {{ t | length }}")
c("llama2_like_strip", "{{ bos_token + '[INST] ' + m.strip() + ' [/INST]' }}", bos_token="<s>", m="  hi  ")
c("loop_over_messages_index", "{% for m in messages %}{% if loop.index0 > 0 and messages[loop.index0 - 1].role == m.role %}dup{% endif %}{{ m.role[0] }}{% endfor %}", messages=[{"role":"user"},{"role":"user"},{"role":"assistant"}])
c("is_string_mapping_iterable", "{% for v in vals %}{{ v is string }}{{ v is mapping }}{{ v is iterable }}{{ v is number }};{% endfor %}", vals=["s", {"a": 1}, [1], 1, None])
c("mistral_out_slice", "{% set out = d | tojson %}{{ out[:-1] }}, \"id\": 1}", d={"name": "f", "arguments": {"x": "é"}})
c("whitespace_realistic", "{%- for m in ms %}\n    {%- if m.role == 'user' %}\n        {{- '[U]' + m.content }}\n    {%- else %}\n        {{- '[A]' + m.content }}\n    {%- endif %}\n{%- endfor %}\n", ms=[{"role":"user","content":"q"},{"role":"assistant","content":"a"}])
c("hf_style_nested_indent", "<s>\n{% for m in ms %}\n  {% if m %}\n    [{{ m }}]\n  {% endif %}\n{% endfor %}\n</s>\n", ms=[1, 0, 2])
c("percent_format", "{{ '%s-%d' % ('a', 3) }} {{ '%05.1f|%-4s|%x' % (3.14159, 'ab', 255) }} {{ '%(n)s!' % {'n': 'hi'} }} {{ '%s' % [1, 2] }} {{ '%r' % 'q' }} {{ '%s %s' | format('x', 1) }} {{ '%(a)s' | format(a='k') }} {{ '100%%' % () }}")
c("with_block", "{% set a = 1 %}{% with a = 2, b = a + 10 %}{{ a }}{{ b }}{% endwith %}{{ a }}[{{ b }}]")
c("strip_unicode", "[{{ '\u3000 x\u00a0' | trim }}][{{ '  é  '.strip() }}][{{ 'é  '.rstrip() }}][{{ '\u00a0é'.lstrip() }}]")
c("title_filter_vs_method", "{{ \"they're here-now (a\" | title }} | {{ \"they're here-now (a\".title() }} | {{ d | title }}", d={"k": "v"})
c("wordcount_words", "{{ 1e20 | wordcount }} {{ 'a_b c-d, e' | wordcount }} {{ xs | wordcount }}", xs=["b", ""])
c("lower_upper_tests", "{{ '123' is lower }} {{ 'abc1' is lower }} {{ 'ABC' is upper }} {{ d is lower }} {{ 1 is upper }}", d={"k": "v"})
c("odd_even_numbers", "{{ 3 is odd }} {{ -3 is odd }} {{ 2.0 is even }} {{ 1e-7 is odd }} {{ 10 is divisibleby(2.5) }} {{ true is odd }}")
c("round_variants", "{{ 1 | round }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.567 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }} {{ -0.5 | round }}")
c("tuple_ops", "{{ (1, 'a')[1:] }} {{ (1, 'a') * 2 }} {{ (1, 2) + (3,) }} {{ [(1, 2)] }}")
c("slice_errors", "{{ n[1:] }}", n=None)
c("str_format_method", "{{ '{} and {name} {{x}}'.format('a', name='b') }} {{ '{0}{1}{0}'.format('x', 2) }}")
c("ws_unicode_space", "a {%- if true -%}\u00a0 b \u00a0{%- endif -%}\u3000 c\n\u00a0 {% if true %}d{% endif %}")

# Random whitespace-control templates (tags with -/+ markers, comments, nested blocks).
texts = ["", " ", "  ", "\n", "\n\n", " \n ", "\t", "x", " x ", "\n  ", "a\n", "  \n\t", "\r\n", "é \n", "\u00a0"]
def sign(): return random.choice(["", "", "-", "+"])
def endsign(): return random.choice(["", "", "-", "+"])
def frag(depth=0):
    k = random.randint(0, 7 if depth < 3 else 3)
    t = random.choice(texts)
    if k == 0: return t
    if k == 1: return t + "{{" + random.choice(["", "-"]) + " 'v' " + random.choice(["", "-"]) + "}}"
    if k == 2: return t + "{#" + sign() + " c " + endsign() + "#}"
    if k == 3: return t + "{%" + sign() + " set q = 1 " + endsign() + "%}"
    if k in (4, 5):
        return (t + "{%" + sign() + " if true " + endsign() + "%}" + body(depth+1) +
                random.choice(["", "{%" + sign() + " else " + endsign() + "%}" + body(depth+1)]) +
                random.choice(texts) + "{%" + sign() + " endif " + endsign() + "%}")
    return (t + "{%" + sign() + " for i in [1, 2] " + endsign() + "%}" + body(depth+1) +
            random.choice(texts) + "{%" + sign() + " endfor " + endsign() + "%}")
def body(depth): return "".join(frag(depth) for _ in range(random.randint(0, 3)))

random.seed(42)
for i in range(40):
    C.append([f"ws_fuzz_{i}", body(0) + random.choice(texts), {}])

out = []
for name, template, variables in C:
    case = {"name": name, "template": template, "variables": variables, "output": None}
    try:
        case["output"] = env.from_string(template).render(**json.loads(json.dumps(variables)))
    except Exception as e:  # noqa: BLE001 - the error is the expectation
        case["error"] = str(e)
        case["error_type"] = type(e).__name__
    out.append(case)
doc = {"_comment": "Jinja feature cases. 'output'/'error' were produced by Python jinja2 3.1.6 with "
       "Hugging Face's settings (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, "
       "extensions=[loopcontrols]), tojson = json.dumps(ensure_ascii=False), raise_exception and "
       "strftime_now globals). 'error_type' TemplateError is the template's own raise_exception. "
       "ws_fuzz_* are randomly generated whitespace-control templates. "
       "Regenerate with make_jinja_features.py.",
       "cases": out}
json.dump(doc, sys.stdout, ensure_ascii=False, indent=1)
