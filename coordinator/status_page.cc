// The live page at "/": one self-contained HTML file (no CDN, no fonts, no images) whose script
// reads /status every two seconds and redraws the tables. Every value from /status is put in the
// page as text (textContent), never as markup: worker ids, GPU models and states come from peers.
#include "coordinator/status_server.h"

namespace kiln::coordinator {

const std::string& status_page_html() {
  static const std::string page = R"HTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kiln - live</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.2em auto;max-width:1200px;padding:0 1em;color:#1d232b}
h1{font-size:1.4em;margin:.2em 0} h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;width:100%} th,td{padding:.25em .6em;border-bottom:1px solid #dde;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums} #err{color:#b00020} .muted{color:#667}
</style></head><body>
<h1>kiln run <span id="run"></span></h1>
<div id="summary" class="muted">waiting for /status ...</div><div id="err"></div>
<h2>Targets</h2><table id="targets"><thead><tr><th>target</th><th>GPU model</th><th>state</th>
<th>evals</th><th>failed</th><th>kept</th><th>seed</th><th>best</th><th>speedup</th><th>of floor</th></tr></thead><tbody></tbody></table>
<h2>Workers</h2><table id="workers"><thead><tr><th>worker</th><th>role</th><th>state</th><th>node</th>
<th>GPU model</th><th>in flight</th><th>credits</th></tr></thead><tbody></tbody></table>
<h2>Queues</h2><div id="queues"></div>
<p class="muted">Also: <a href="status">/status</a> (JSON), <a href="metrics">/metrics</a> (Prometheus),
<a href="healthz">/healthz</a>, <a href="readyz">/readyz</a>. <code>kiln report</code> writes the full report.</p>
<script>
"use strict";
function us(v){return v>0?(v>=1000?(v/1000).toFixed(2)+" ms":v.toFixed(2)+" \u00b5s"):"-";}
function fill(id,rows,cells){
  const body=document.querySelector("#"+id+" tbody");
  body.replaceChildren();
  for(const r of rows){
    const tr=document.createElement("tr");
    for(const [value,num] of cells(r)){
      const td=document.createElement("td");td.textContent=String(value);if(num)td.className="n";tr.appendChild(td);
    }
    body.appendChild(tr);
  }
}
async function refresh(){
  try{
    const res=await fetch("status",{cache:"no-store"});
    if(!res.ok){document.getElementById("err").textContent="/status: "+res.status+" "+(await res.text());return;}
    const s=await res.json();
    document.getElementById("err").textContent="";
    document.getElementById("run").textContent=s.run.id+" ("+s.run.state+")";
    document.getElementById("summary").textContent=s.run.mode+" on the "+s.run.backend+" backend; search time "+
      s.run.search_s.toFixed(0)+" s"+(s.run.budget_s>0?" of "+s.run.budget_s.toFixed(0)+" s":"")+"; updated "+s.updated_at;
    fill("targets",s.targets,t=>[[t.shape?t.target+" "+t.shape:t.target],[t.gpu_model||"any"],[t.state],[t.evaluations,1],[t.failures,1],
      [t.accepted,1],[us(t.seed_us),1],[us(t.best_us),1],[t.speedup>0?t.speedup.toFixed(2)+"x":"-",1],
      [t.fraction_of_floor>0?(100*t.fraction_of_floor).toFixed(1)+"%":"-",1]]);
    fill("workers",s.workers,w=>[[w.worker_id],[w.role],[w.state],[w.node],[w.gpu_model||"-"],[w.in_flight,1],[w.credits,1]]);
    const q=s.queues;
    document.getElementById("queues").textContent="evaluations queued "+q.evaluate_queued+", in flight "+
      q.evaluate_in_flight+"; proposals queued "+q.propose_queued+", in flight "+q.propose_in_flight+
      "; quarantined "+q.quarantined+"; leases requeued "+s.dispatch.requeued;
  }catch(e){document.getElementById("err").textContent="cannot read /status: "+e;}
}
refresh();setInterval(refresh,2000);
</script></body></html>
)HTML";
  return page;
}

}  // namespace kiln::coordinator
