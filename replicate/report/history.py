"""How the headline moved, and why: the count of replication claims changes only by a reason stated here.

Each entry: the date, the headline before and after (replication claims holding / counted), and the changes
item by item. Newest first; REPLICATION.md renders them under its headline.
"""
from __future__ import annotations

HISTORY: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("2026-12-06", "40 of 60", "36 of 56", (
        "The report's own kind rule applied where an independent audit found it was not. Li et al. Table 2, "
        "synthetic(0,0) and (1,1): of 2,000 draws (the change below), the std's 5-95% range, [358, 3,910], spans "
        "×10.9, past the factor of ten at which the rule makes 'the paper's number inside the range of our draws' a "
        "consistency check (basis wide-range, as Figure 1a's synthetic(0,0) since 2026-11-27); the claims now "
        "compute their spread and take that basis themselves. The move to 2,000 draws that made synthetic(1,1) hold "
        "is what widened its range past the rule (−2 counted, −2 holding)",
        "Li et al. Figure 2, Theorem 5 (‖w̃* − w*‖ ≥ (E−1)η/16·‖A₁A₂w*‖): w̃* is FedAvg's fixed point from its closed "
        "form, no run behind it, so the check is a property of the formula, a consistency check (basis closed-form; "
        "−1 counted, −1 holding)",
        "Li et al.'s eq. (8) against Figure 1a on synthetic(0,0) (the notes' optimal-E row): E* = 638 steps and "
        "every E inside the measured grid (100-1,250) lies within 0.80 decades of it, so the margin 'E* within one "
        "decade of the measured near-optimal range' cannot fail once the minimum is inside the grid, which Figure "
        "1a's own claim already tests; a margin no grid point can miss is now a consistency check (a new basis, "
        "powerless, computed from the grid). synthetic(1,1)'s (E* = 1,632 against 100-300) can fail and still "
        "counts (−1 counted, −1 holding)",
        "Not in the headline: FedProx Table 1's FEMNIST row quotes the authors' final README, outside the five "
        "documents, and was a consistency check because its seed is fitted; a source outside the five documents "
        "now decides first, so it is context, counted nowhere (the consistency tally loses one that holds)",
    )),
    ("2026-12-06", "39 of 67", "40 of 60", (
        "Li et al. Table 2, synthetic(1,1): the paper's sample total and std were tested against the 5-95% range of "
        "20 of our data draws, which leaves one draw beyond each end of the range; now of 2,000 draws (each end within "
        "about ±1 percentile point), margin unchanged: the paper's std (421) lies inside [358, 3,910] (it was below "
        "[479, 2,578]) and the claim holds (+1 holding)",
        "Li et al. Figures 1c/d, 3 and 4: an ordering ('Scheme I performs best', 'T-Scheme II converges more "
        "slowly') and 'FedAvg converges for every K' were demanded of every single seed, where the paper shows one "
        "run a curve; they test the seed mean now (the single seeds' range and how many agree shown beside), margins "
        "unchanged (1%, fluctuation below 0.2). Figure 3's 'converges for every K' on the three other sets and Figure "
        "4's two synthetic(0,0) orderings now hold (+3 holding); the re-posed forms hold on the committed numbers as "
        "well, so the move is the re-posing's. Figure 4's 'the tuned Original performs second' still fails on both "
        "sets (T-Scheme II is second). Figure 3 was recomputed on this machine's CPU: its numbers moved by float "
        "rounding (at most 1e-5 relative on three sets, up to 6% on synthetic(1,1), whose runs amplify it), no "
        "verdict with them; Figures 1c/d and 4 reproduced bitwise",
        "The lecture notes' three 'the measured gap decays like 1/T' claims tested a slope at T ≪ γ = 8κ "
        "(γ ≈ 2e6-2e7 against 1,000-4,000 steps), where the bound v/(γ + T) is itself flat: they are closed-form "
        "consistency checks now, saying so. The rate is tested instead on an instance where T ≫ γ (PROPOSED: the same "
        "data with λ raised until κ = 5, γ = 40), as three replication claims with the former margin (a slope within "
        "±0.25 of −1): all three fail, the gap falling faster than 1/T there (slopes −2.5 to −3.8). The paper's "
        "O(1/T) is an upper bound, which a one-sided claim would test; that was seen after these runs, so the claims "
        "stay as posed (three failing claims out, three failing claims in: ±0)",
        "FedProx Figures 2-4 republished under the kind rule: their seven claims that read the EMNIST and EMNIST* "
        "stand-ins (the partial LEAF copy) are context now, shown and counted nowhere (−7 counted, −3 holding)",
        "FedProx Figures 1 and 5 republished with each synthetic set its own draw per seed, of the authors' size "
        "(they had shared one 22,349-sample draw): the same verdicts (1 of 3), on wider spreads",
        "Every replication claim of Li et al. Figures 1c/d, 2, 3 and 4 records its margin in its margin field (13 "
        "kept it in the result text only); Li et al. Figure 1a republished "
        "with each synthetic draw's settling loss f(w*) beside its rounds: our targets sit 0.22-0.57 (synthetic(0,0)) "
        "and 0.63-0.83 (synthetic(1,1)) above our draws' f(w*), while the lowest loss the paper's synthetic(1,1) runs "
        "reached lies 0.075 below its target, the diagnosis of the 3.6x; claims unchanged, the same verdicts; its "
        "runs recomputed, of the same configs, on another CPU (AVX-512), where MNIST unbalanced's flat loss crosses "
        "its target some rounds apart (E = 30: 126 -> 120 rounds, E = 400: 185 -> 180), the synthetic draws' not "
        "at all (±0)",
    )),
    ("2026-11-28", "42 of 72", "39 of 67", (
        "The final FedProx paper's straggler figure (Figure 1): every statement it tests comes from the final paper, "
        "which is not among the five documents (the draft has no stragglers), two quoted as recalled and three with no "
        "source at all. All five are external now: shown beside the figure, never counted (the "
        "figure republished from its runs, numbers unchanged). Of the five, three had held: 'FedProx μ > 0 is robust "
        "where FedAvg degrades', 'keeping partial work already beats dropping it' and 'the proximal term helps beyond "
        "partial work'; 'FedAvg degrades as stragglers grow' and the +22-point average gain had failed (−5 counted, "
        "−3 holding)",
    )),
    ("2026-11-27", "42 of 69", "42 of 72", (
        "Khanduri et al. Figure 5 published at the paper profile (104 runs from two H200 sessions, through the "
        "ledger): its three replication claims now count, and all three fail, because every STEM candidate of the "
        "PROPOSED grid diverges on the tuning seed at the full budget of 30,000 samples per worker (+3 counted, "
        "+0 holding). The claims say that STEM had no tuned setting instead of calling its grid's first pair "
        "'tuned at the edge'",
    )),
    ("2026-11-27", "43 of 70", "42 of 69", (
        "Li et al. Figure 1a, synthetic(0,0): 'the paper's required rounds lie within the range of our data draws' "
        "set the authors' one unseeded draw against six of ours that span ×18.7 (median over E; 16–397 rounds at "
        "E = 20), a range a plausible wrong result lands in too; such a comparison is now a consistency check (a new "
        "basis, wide-range: draws spanning a factor of ten or more), while synthetic(1,1)'s, whose draws span ×2.6, "
        "stays a replication claim (and fails). The factor of ten was chosen after seeing both spreads (−1 counted, "
        "−1 holding)",
        "The figure was republished for it on this build machine's CPU: 5 of its 109 measured points moved by 1-6 "
        "rounds against the committed ones from another CPU (mnist unbalanced E = 10, 30, 400; two synthetic(0,0) "
        "draws at E = 200), the mnist unbalanced median difference from the paper 6 % → 8 %; every verdict the same",
    )),
    ("2026-11-27", "41 of 68", "43 of 70", (
        "Li et al. Figures 1b and 3: §6 states the impact of K for synthetic(0,0), which Figure 1b shows, and then "
        "for the other three sets, which Figure 3 adds; its three observations are now claimed once per statement, "
        "each counted in its own row, so Figure 1b no longer fails through a synthetic(1,1) curve it does not show "
        "(+3 counted, +3 holding)",
        "Li et al.'s eq. (8) against Figure 1a (the notes' row): no claim on mnist balanced, where §6 says the "
        "trade-off does not appear and E* has nothing to match (−1 counted, failing)",
        "Li et al. Figure 2: 'the decayed rate converges to the optimum' held for any run ending below 1 % of the "
        "initial gap, which every fixed-rate stall does too; restated so that a stall fails it (the distance to w* "
        "still falls over the second half of the rounds), it fails: at E = 5 and 10 the authors' decay (a = 1e-6) "
        "keeps η at 0.08 and the runs sit at their fixed point (−1 holding)",
    )),
    ("2026-11-27", "41 of 74", "41 of 68", (
        "FedProx Table 1: the final README's Shakespeare and Sent140 rows and the final paper's Synthetic row quote "
        "sources outside the five documents (one claim per statement of the draft), and its EMNIST and Sent140 draft "
        "rows compare with data held here only in part (a partial LEAF FEMNIST copy, LEAF's Sent140 test split): "
        "shown beside the table, not counted (a new kind, context; −5 counted, all five failing)",
        "Charles & Konečný Table 3's FEMNIST row, against the partial LEAF copy for TFF's EMNIST-62: likewise "
        "(−1 counted, failing)",
    )),
    ("2026-11-27", "49 of 82", "41 of 74", (
        "Charles & Konečný Table 2: its four rate claims (LocalUpdate at ρ(κ) on the tight instance, no momentum / "
        "Nesterov / heavy-ball, and the momentum order) compare runs on constructed quadratics with the formula they "
        "equal by construction (1e-16 … 3e-7): identities of our implementation, now consistency checks, and the "
        "row an analytic redraw (−4 counted, −4 holding)",
        "Charles & Konečný's measured-ρ figure, an item of ours: its four claims likewise (surrogate minimiser, ρ "
        "and ε on the worst case, Theorem 3's bound on a random problem), and the item leaves the papers' coverage "
        "table (−4 counted, −4 holding)",
    )),
)


def lines() -> list[str]:
    """The history as REPLICATION.md shows it."""
    out = ["How the headline moved (replicate/report/history.py):", ""]
    for date, before, after, changes in HISTORY:
        out.append(f"- {date}: {before} → {after} replication claims hold. " + " ".join(
            f"({i}) {change}." for i, change in enumerate(changes, 1)))
    return out + [""]
