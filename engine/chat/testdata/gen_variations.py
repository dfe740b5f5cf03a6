# Regenerates variations.json: the shared fixture templates rendered by
# Python's jinja2 (transformers' settings, as gen_probes.py) over message
# shapes the fixture cases do not cover (null content with tool calls,
# several tool calls, string arguments, list content, reasoning_content,
# whitespace, system-only, ...), each with and without tools,
# add_generation_prompt and enable_thinking=False.
# Run: python3 gen_variations.py [FIXTURES_DIR] (needs jinja2 3.1.x).
import json, datetime, os, sys
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.ext import loopcontrols
def raise_exception(m): raise jinja2.exceptions.TemplateError(m)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda f: datetime.datetime(2026,1,15,12,0,0).strftime(f)
HERE=os.path.dirname(os.path.abspath(__file__))
D=sys.argv[1] if len(sys.argv)>1 else os.path.join(HERE,'..','..','..','..','shared','fixtures','templates')
base = json.load(open(D+'/cases.json'))
special = {c['template']: c['special_tokens'] for c in base}
tools = [c['tools'] for c in base if c['tools']][0]
tools2 = tools + [{"type":"function","function":{"name":"search","description":"Search the web & return <results>.","parameters":{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer","default":5},"opts":{"type":"object","properties":{}}},"required":["q"]}}}]
M = {
 "tool_null_content": [{"role":"user","content":"Weather?"},{"role":"assistant","content":None,"tool_calls":[{"id":"abc123DEF","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","days":3,"temp":21.5,"flag":True,"list":[1,"a",None]}}}]},{"role":"tool","tool_call_id":"abc123DEF","name":"get_weather","content":"sunny"},{"role":"user","content":"thanks"}],
 "two_tool_calls": [{"role":"system","content":"sys"},{"role":"user","content":"Two?"},{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"abc123DEF","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}},{"id":"xyz789GHI","type":"function","function":{"name":"search","arguments":"{\"q\": \"x\"}"}}]},{"role":"tool","tool_call_id":"abc123DEF","content":"a"},{"role":"tool","tool_call_id":"xyz789GHI","content":"b"}],
 "multi_turn_think": [{"role":"user","content":"a"},{"role":"assistant","content":"<think>\nr1\n</think>\n\nx1"},{"role":"user","content":"b"},{"role":"assistant","content":"<think>r2</think>x2"},{"role":"user","content":"c"}],
 "whitespace": [{"role":"system","content":"  padded system  \n"},{"role":"user","content":"\n\tline1\n\nline2  "}],
 "system_only": [{"role":"system","content":"Only system."}],
 "empty_content": [{"role":"user","content":""}],
 "special_chars": [{"role":"user","content":"{{ not a template }} {% raw %} <|im_end|> \"quotes\" 'single' \\backslash"}],
 "list_content": [{"role":"user","content":[{"type":"text","text":"Describe"},{"type":"image"},{"type":"text","text":" please"}]}],
 "assistant_last": [{"role":"user","content":"hi"},{"role":"assistant","content":"<think>\nhm\n</think>\n\nhello"}],
 "reasoning_content_multi": [{"role":"user","content":"a"},{"role":"assistant","content":"x","reasoning_content":"because"},{"role":"user","content":"b"},{"role":"assistant","content":"y","reasoning_content":"  r  "}],
}
out=[]
for t in sorted(set(c['template'] for c in base)):
    src=open(os.path.join(D,t)).read()
    tpl=env.from_string(src)
    for mid, msgs in M.items():
        for tl in (None, tools2):
            for agp in (True, False):
                for kw in ({}, {"enable_thinking": False}):
                    ctx=dict(messages=msgs, tools=tl, documents=None, add_generation_prompt=agp, **special[t], **kw)
                    rec={"template":t,"id":f"{mid}{'_tools' if tl else ''}{'_agp' if agp else ''}{'_nothink' if kw else ''}","messages":msgs,"tools":tl,"add_generation_prompt":agp,"kwargs":kw,"special_tokens":special[t]}
                    try: rec["expected"]=tpl.render(**ctx)
                    except Exception as e: rec["expected_error"]=type(e).__name__+": "+str(e)
                    out.append(rec)
json.dump(out, open(os.path.join(HERE,'variations.json'),'w'), ensure_ascii=False)
print(len(out), sum('expected_error' in r for r in out))
