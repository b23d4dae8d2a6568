"""bench/results.md: the machine, every figure against its target, and the per-agent table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# figure -> (what it is, unit); figures not listed are shown by name.
LABELS: dict[str, tuple[str, str]] = {
    "concurrency_ratio_10": ("wall / ideal, concurrency 10 (200 ms mock)", "×"),
    "concurrency_ratio_100": ("wall / ideal, concurrency 100", "×"),
    "concurrency_ratio_1000": ("wall / ideal, concurrency 1,000", "×"),
    "concurrency_ratio_1000_vs_cpu_bound": (
        "wall / ideal at concurrency 1,000 ÷ its CPU bound max(1, ρ) (same run)", "×"),
    "concurrency_ratio_1000_at_2s": ("wall / ideal, 1,000 dialogues, mock answering in 2 s", "×"),
    "concurrency_ratio_1000_at_2s_minimal": (
        "floor: the same with a bare asyncio HTTP/1.1 client, same mock (same run)", "×"),
    "concurrency_ratio_1000_httpx": ("wall / ideal at 1,000 over the httpx2 fallback (A/B, same run)", "×"),
    "client_cpu_ms_per_request": ("process CPU per LLM request at concurrency 500 (full LLM layer + engine)", "ms"),
    "client_cpu_ms_per_request_aiohttp": (
        "same client over aiohttp instead of its own connections (A/B, same run)", "ms"),
    "client_cpu_ms_per_request_httpx": ("same over the httpx2 fallback (A/B, same run)", "ms"),
    "client_cpu_ms_per_request_openai_aiohttp": ("same over openai's own aiohttp client (A/B, same run)", "ms"),
    "client_cpu_ms_per_request_1000": ("same at concurrency 1,000", "ms"),
    "embedding_batch_speedup": ("offline demo throughput, embedding batching + caching on vs off (same run)", "×"),
    "offline_cpu_s_per_dialogue": ("process CPU per offline demo dialogue (offline simulator, bm25_extractive)", "s"),
    "demo_fresh_clone_s": ("git clone to finished ./scripts/demo (setup, index build, 41 dialogues), empty cache", "s"),
    "demo_second_run_s": ("./scripts/demo again in that clone (venv, index, model and vector cache there)", "s"),
    "agent_cpu_ms_per_turn_nii_gtr": ("nii_gtr: process CPU per turn, 200 ms mock LLM", "ms"),
    "agent_cpu_ms_per_turn_iiuot": ("iiuot: process CPU per turn, 200 ms mock LLM", "ms"),
    "agent_cpu_ms_per_turn_acms": ("acms: process CPU per turn, 200 ms mock LLM", "ms"),
    "client_cpu_ms_per_request_minimal": ("floor: a bare asyncio HTTP/1.1 client, same mock, 1,000 connections", "ms"),
    "engine_overhead_ms_per_turn": ("engine CPU per turn (no LLM client, no retrieval)", "ms"),
    "rate_limit_utilisation": ("achieved / configured rpm (R = 1,200; the mock enforces R per minute)", ""),
    "rate_limit_self_429s": ("429s caused by simloop's own pacing", ""),
    "bm25_batch_speedup": ("micro-batched vs one-per-call BM25, 1,000 concurrent queries", "×"),
    "bm25_batch_speedup_1_thread": ("same, batch_search on 1 Java thread instead of 2", "×"),
    "loop_lag_p99_ms": ("event-loop lag p99, 500 dialogues retrieving (model answers in 100-300 ms)", "ms"),
    "loop_lag_p99_ms_lockstep": ("same, every model call exactly 200 ms (dialogues in lockstep)", "ms"),
    "loop_lag_p99_ms_stress": ("same, model answering at once (stress)", "ms"),
    "loop_lag_p99_ms_idle": ("same ticker on an idle loop, right before (the machine's own noise)", "ms"),
    "memory_per_dialogue_kib": ("RSS per active dialogue, 10,000 parked mid-turn", "KiB"),
    "memory_per_dialogue_traced_kib": ("Python allocations per parked dialogue (tracemalloc)", "KiB"),
    "ptkb_ndcg3_ikat23": ("PTKB nDCG@3, no-LLM ranker, iKAT-23 test vs NIST ptkb_rel_nist (best 2023 run 0.7254)", ""),
    "ptkb_p3_ikat23": ("PTKB P@3, same", ""),
    "ptkb_r3_ikat23": ("PTKB R@3, same", ""),
    "ptkb_f1_ikat23": ("PTKB set F1 of the used statements, same", ""),
    "ptkb_ndcg5_ikat24": ("PTKB nDCG@5, iKAT-24 test vs the topics' gold", ""),
    "ptkb_ndcg3_ikat24": ("PTKB nDCG@3, same", ""),
    "ptkb_ndcg3_train23": ("PTKB nDCG@3 on 2023 train (the set parameters were chosen on)", ""),
    "ptkb_f1_train23": ("PTKB set F1 on 2023 train", ""),
    # The fast MiniLM ranker, the same sets and scoring (no targets: not the default).
    "ptkb_ndcg3_ikat23_minilm": ("PTKB nDCG@3, iKAT-23 test vs NIST, MiniLM ranker (encoder=minilm)", ""),
    "ptkb_p3_ikat23_minilm": ("PTKB P@3, same", ""),
    "ptkb_r3_ikat23_minilm": ("PTKB R@3, same", ""),
    "ptkb_f1_ikat23_minilm": ("PTKB set F1, same", ""),
    "ptkb_ndcg5_ikat24_minilm": ("PTKB nDCG@5, iKAT-24 vs gold, MiniLM ranker", ""),
    "ptkb_ndcg3_ikat24_minilm": ("PTKB nDCG@3, same", ""),
    "ptkb_ndcg3_train23_minilm": ("PTKB nDCG@3 on 2023 train, MiniLM ranker", ""),
    "ptkb_f1_train23_minilm": ("PTKB set F1 on 2023 train, same", ""),
    "answer_offtopic_sentence_share": (
        "demo answer sentences off the reference's subject by the grader's focus rule", ""),
    "answer_offtopic_labelled_share": (
        "demo answer sentences hand-labelled off topic (bench/labels), of those labelled", ""),
    "answer_offtopic_measure_recall": ("focus rule vs hand labels: share of labelled off-topic sentences it flags", ""),
    "answer_offtopic_measure_precision": ("focus rule vs hand labels: share of its flags labelled off topic", ""),
    "answer_words_max": ("longest demo answer (bm25_extractive, cap 220)", "words"),
    "memory_recall_full_d40": ("memory test recall at distance 40, full history (offline)", ""),
    "memory_recall_window_d40": ("memory test recall at distance 40, 3-turn window (offline)", ""),
    # section grader: real iKAT answers, 2023 test + 2024 pooled (parameters chosen on 2023 train)
    "grader_auc_true_vs_restated": ("ROC-AUC, human answer vs the question restated with filler", ""),
    "grader_auc_true_vs_other_turn": ("ROC-AUC, human answer vs another turn's answer, same conversation", ""),
    "grader_auc_true_vs_other_topic": ("ROC-AUC, human answer vs another topic's answer", ""),
    "grader_padding_penalised": (
        "share of turns whose padded answer (+2 off-topic sentences) grades below the true one", ""),
    "grader_true_pass_rate": ("human answers passing (grade > 3)", ""),
    "grader_restated_pass_rate": ("restatements passing (informational)", ""),
    "grader_clarify_pass_rate": ("clarifying questions passing (informational)", ""),
    "grader_other_topic_pass_rate": ("other topics' answers passing (informational)", ""),
    "grader_other_turn_pass_rate": ("other turns' answers passing (informational)", ""),
    "grader_e2e_parrot_satisfied": ("demo personas vs the parrot assistant: share ending user_satisfied", ""),
    "grader_e2e_offtopic_satisfied": ("demo personas vs the off-topic assistant: share user_satisfied", ""),
    "grader_e2e_asker_satisfied": ("demo personas vs the always-asking assistant: share user_satisfied", ""),
    "grader_e2e_bm25_extractive_satisfied": ("demo personas vs bm25_extractive: share user_satisfied", ""),
    "grader_e2e_negated_satisfied": ("demo personas vs bm25_extractive's answers negated: share user_satisfied", ""),
    # evidence: graded with a reference; headline = gold + passages ("issue" mode)
    "grader_auc_true_vs_negated": ("ROC-AUC, human answer vs the same answer negated (reference: gold + passages)", ""),
    "grader_auc_true_vs_entity_swapped": ("ROC-AUC, human answer vs its names swapped (same reference)", ""),
    "grader_auc_true_vs_padded": ("ROC-AUC, human answer vs + 1-2 sentences of a neighbouring passage", ""),
    "grader_auc_true_vs_earlier": ("ROC-AUC, human answer vs an earlier turn's answer (earlier questions known)", ""),
    "grader_auc_true_vs_negated_held_out": ("the same, negated by the held-out generator (opposites, never)", ""),
    "grader_auc_true_vs_entity_swapped_held_out": ("the same, names from the conversation's other turns", ""),
    "grader_auc_true_vs_padded_held_out": ("the same, padding from other topics' human answers", ""),
    "grader_auc_true_vs_negated_honest": ("negated, honest mode: the answer is not in its reference", ""),
    "grader_auc_true_vs_entity_swapped_honest": ("names swapped, honest mode", ""),
    "grader_auc_true_vs_padded_honest": ("neighbour padding, honest mode", ""),
    "grader_auc_true_vs_earlier_honest": ("earlier turn's answer, honest mode", ""),
    "grader_true_pass_rate_reference": ("human answers passing with gold + passages as reference", ""),
    "grader_true_pass_rate_honest": ("human answers passing, honest mode (passages, or other turns' answers)", ""),
    # section realism: demo utterances vs every real iKAT 2023/2024 user utterance
    "voice_words_per_utterance": ("words per demo utterance (target: ±30% of the real mean)", ""),
    "voice_distinct2": ("distinct word bigrams / bigrams (200-utterance samples)", ""),
    "voice_verbatim_rubric_share": ("utterances repeating their rubric question word for word", ""),
    "voice_backreference_share": ("utterances leading with it/that/this/they/those", ""),
    "voice_non_question_share": ("utterances without a question mark", ""),
    "voice_top_utterance_share": ("share of the commonest utterance", ""),
    # section real-llm: SmolLM2-135M on llama-cpp-python's server (simloop llm-server)
    "real_llm_roles_ok": ("LLM roles that finished a dialogue without a protocol error", ""),
    "real_llm_protocol_errors": ("errors caused by the protocol (refused parameters, non-completions)", ""),
    "real_llm_invalid_outputs_recorded_as_utterances": ("recorded user utterances the voice's check rejects", ""),
    "real_llm_seconds_per_call": ("the server's time per chat request, one role at a time", "s"),
    "real_llm_server_busy_share": ("share of a concurrency-4 run's wall time with a request at the server", ""),
}


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.3f}".rstrip("0").rstrip(".") if abs(v) < 100 else f"{v:,.1f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _target(key: str, fig: dict[str, Any]) -> str:
    t = fig.get("target")
    if t is None:
        return "—"
    if isinstance(t, (list, tuple)) and len(t) == 2:
        return f"{_fmt(t[0])}–{_fmt(t[1])}"
    higher = fig.get("better") == "higher"
    return f"{'≥' if higher else ('=' if t == 0 else '≤')} {_fmt(t)}"


def write_markdown(path: Path, results: dict[str, Any], details: dict[str, Any]) -> None:
    m = details.get("machine", {})
    quick = " --quick" if details.get("quick") else ""
    lines = ["# simloop benchmarks", "",
             f"Written by `scripts/bench{quick}` at {details.get('finished_at', '?')}. "
             "Figures are `bench/results.json`; everything measured on the way is in `bench/details.json`.", "",
             "## Machine", "",
             f"- CPU: {m.get('cpu', '?')}, {m.get('cores', '?')} cores; RAM {m.get('ram_gib', '?')} GiB; "
             f"{m.get('os', '')}",
             f"- Python: {m.get('python', '?')}; load average at start: {m.get('loadavg_at_start', '?')} "
             "(the cores were shared with other work: absolute times are noisy, ratios within one run less so)",
             "- Versions: " + ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items()), "",
             "## Figures", "", "| figure | what | value | target | ok |", "| --- | --- | ---: | ---: | :---: |"]
    for key, fig in results.items():
        if key.startswith("agent_") and fig.get("target") is None:  # the per-agent table shows these
            continue
        what, unit = LABELS.get(key, (key, ""))
        sep = "" if unit == "×" else " "
        value = _fmt(fig.get("value")) + (f"{sep}{unit}" if unit and fig.get("value") is not None else "")
        ok = "yes" if fig.get("ok") else "**no**"
        lines.append(f"| `{key}` | {what} | {value} | {_target(key, fig)} | {ok} |")
    lines += _agents(details)
    lines += _voice(details)
    lines += _notes(details)
    path.write_text("\n".join(lines) + "\n")


def _agents(details: dict[str, Any]) -> list[str]:
    a = details.get("benches", {}).get("agents")
    if not a or "agents" not in a:
        return []
    out = ["", f"## Cost per turn of each reference agent (mock LLM, {_fmt(a['latency_ms'])} ms per call; "
           f"{a['dialogues']} dialogues × {a['turns']} turns each, one at a time)", "",
           "| agent | LLM requests / turn | LLM stages / turn | prompt tokens / turn | completion tokens / turn "
           "| wall ms / turn (mean) | CPU ms / turn | errors |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for label, r in a["agents"].items():
        if "error" in r:
            out.append(f"| `{label}` | failed: {r['error']} | | | | | | |")
            continue
        out.append(f"| `{label}` | {_fmt(r['requests_per_turn'])} | {_fmt(r['llm_stages_per_turn'])} | "
                   f"{_fmt(r['prompt_tokens_per_turn'])} | {_fmt(r['completion_tokens_per_turn'])} | "
                   f"{_fmt(r['wall_ms_per_turn'])} | {_fmt(r['cpu_ms_per_turn'])} | {r['errors']} |")
    if a.get("missing"):
        out.append(f"\nNot registered (yet): {', '.join(a['missing'])}.")
    out.append("\nCompletion tokens come from the mock's synthetic answers; prompt tokens are the agent's own. "
               "Wall time = sequential LLM calls × latency + local work (MiniLM and MPNet on CPU, BM25); "
               "CPU is the whole process's (MiniLM, MPNet, JVM and client threads included).")
    return out


def _voice(details: dict[str, Any]) -> list[str]:
    """Section realism: the demo's utterance statistics beside the real ones."""
    r = details.get("benches", {}).get("realism")
    if not r or "demo" not in r:
        return []
    demo, real = r["demo"], r["real"]
    out = ["", f"## Demo utterances vs real iKAT users ({demo['utterances']:,} demo, {real['utterances']:,} real "
           "utterances: 2023 train + test, 2024)", "", "| statistic | demo | real |", "| --- | ---: | ---: |"]
    for key in ("words_per_utterance", "distinct2", "verbatim_rubric_share", "backreference_share",
                "backreference_request_share", "non_question_share", "top_utterance_share"):
        out.append(f"| {key} | {_fmt(demo.get(key))} | {_fmt(real.get(key))} |")
    sat = r.get("satisfied", {})
    if sat:
        out.append(f"\nDemo run: {sat.get('dialogues')} dialogues, {sat.get('user_satisfied')} ended user_satisfied; "
                   f"commonest utterance: \"{demo.get('top_utterance', '')}\".")
    return out


def _notes(details: dict[str, Any]) -> list[str]:
    b = details.get("benches", {})
    out = ["", "## Notes", ""]
    c = b.get("concurrency", {})
    for row in c.get("runs", []):
        out.append(f"- concurrency {row['concurrency']}: {row['dialogues']} dialogues × {row['turns']} turns, "
                   f"{row['req_per_s']} req/s achieved of {row['needed_req_per_s']} needed; "
                   f"{row['client_cpu_ms_per_request']} ms CPU per request → client load ρ = "
                   f"{row['client_load']} (one core; the ratio cannot go below max(1, ρ))")
    prof = c.get("client_profile") or {}
    if prof.get("by_package"):
        pk = ", ".join(f"{k} {v:.0%}" for k, v in list(prof["by_package"].items())[:8])
        out.append(f"- client CPU at concurrency 1,000 by package (pyinstrument self time): {pk}; "
                   f"full text in `{prof.get('profile_text')}`")
    aio = c.get("aiohttp_run") or {}
    if aio:
        out.append(f"- experiment, openai over aiohttp instead of httpx2: {aio['client_cpu_ms_per_request']} ms CPU "
                   f"per request, ratio {aio['ratio']} at concurrency {aio['concurrency']}")
    floor = c.get("minimal_client") or {}
    if floor:
        out.append(f"- floor, a bare asyncio HTTP/1.1 client (no SDK, no engine) at {floor['connections']} "
                   f"connections: {floor['cpu_ms_per_request']} ms CPU per request, wall/ideal {floor['ratio']}; "
                   f"the mock itself spent {floor['mock_cpu_ms_per_request']} ms CPU per request")
    eo = b.get("engine_overhead", {})
    if eo.get("profile"):
        rows = eo["profile"].get("top_self_without_fakes", eo["profile"]["top_self"])
        top = ", ".join(f"{r['function']} {r['share']:.0%}" for r in rows[:6])
        out.append(f"- engine overhead profile (share of busy samples, the fakes' own frames left out; top 6): {top}; "
                   f"full text in `{eo.get('profile_text')}`")
    rl = b.get("rate_limit", {})
    if rl.get("rpm"):
        out.append(f"- rate limit: {rl['requests_in_window']} requests in {rl['window_s']} s at R = {_fmt(rl['rpm'])} "
                   f"(per second {rl['rps_min']}–{rl['rps_max']}); mock's peak sliding-minute count "
                   f"{rl['peak_rpm_60s']}. {rl.get('note', '')}")
    rt = b.get("retrieval", {})
    if rt.get("batching"):
        bt = rt["batching"]
        out.append(f"- BM25: {bt['queries']} concurrent queries, median of {bt['rounds']} paired rounds: batched "
                   f"{bt['batched_ms_per_query']} ms/query, one per call {bt['sequential_ms_per_query']} ms/query "
                   f"(speedup of the fastest rounds: {bt.get('speedup_of_minima')}×)")
    gr = b.get("grader", {})
    for assistant, row in (gr.get("e2e") or {}).items():
        if "stop_reasons" in row:
            reasons = ", ".join(f"{k} {v}" for k, v in row["stop_reasons"].items())
            out.append(f"- grader end to end, `{assistant}` vs the offline simulator: {row['dialogues']} dialogues "
                       f"({reasons}); turns passing {_fmt(row.get('turn_pass_rate'))}")
    pooled = gr.get("report_pooled") or {}
    if pooled.get("pass_rate"):
        rates = ", ".join(f"{k} {_fmt(v)}" for k, v in pooled["pass_rate"].items())
        out.append(f"- grader pass rates by candidate kind ({' + '.join(pooled.get('sets', []))}): {rates}")
    dm = b.get("demo", {})
    if dm.get("first"):
        lk = dm.get("lookups") or {}
        out.append(f"- demo: load average {dm.get('loadavg_before')} before, {dm.get('loadavg_after_first')} after the "
                   f"fresh clone's demo; its dialogues {dm['first'].get('dialogues_wall_s')} s, the second run's "
                   f"{(dm.get('second') or {}).get('dialogues_wall_s')} s; same answers with an empty and a full "
                   f"vector cache: {dm.get('same_answers')}; pip's cache {dm.get('pip_cache_mb')} MB; vector cache "
                   f"{lk.get('rows')} vectors, {lk.get('size_mb')} MB, a lookup of 64 texts {lk.get('p50_ms')} ms "
                   f"(p95 {lk.get('p95_ms')})")
    for name, det in b.items():
        if "error" in det:
            out.append(f"- {name}: did not finish ({det['error']})")
    return out if len(out) > 3 else []
