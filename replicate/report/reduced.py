"""The labelled runs committed beside the paper-profile figures: below the paper's scale under
``figures/cpu_scale/<paper>/``, or at the paper's scale with a setting changed (a PROPOSED alternative beside the
default, e.g. STEM's second grid) under ``figures/modified/``. For each: what is reduced or changed against the
paper's settings, the command that produced it (a paper-profile run with ``--set`` overrides and ``out_dir`` one of
those folders, the only way the batch runner writes there), and what its numbers show beyond its claims.
REPLICATION.md shows them in their own section and never counts them.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from replicate.report import facts, reduced_facts
from replicate.core.paths import MODIFIED_FOLDER

# --set names that say where or how a figure runs, not what it computes: never a changed knob of a record
NOT_KNOBS = ("out_dir", "workers", "data_source")  # data_source: labelled apart (a stand-in is data-limited)


@dataclass(frozen=True)
class Reduced:
    """A run below the paper's scale, committed under ``figures/cpu_scale/<paper>/`` where the paper's scale does
    not fit the CPU the records were computed on, or at the paper's scale with a setting changed (``modified``,
    under ``figures/modified/``): its claims are shown, labelled, and never counted."""

    key: str  # figures/<key>.claims.json: "cpu_scale/<paper>/<figure>" (or "modified/...", a folder between allowed)
    what: str
    scale: str  # what is reduced, against the paper's settings
    command: str  # how it was produced (never by a plain paper-profile run)
    note: str = ""  # what the numbers show beyond the claims (observations, not verdicts)
    stale: str = ""  # why the committed outputs predate today's claims, and the command that republishes them
    facts: Callable[[Path], dict] | None = None  # the numbers its note names ({name}), read from its CSV

    def text(self, root: Path) -> str:
        """The note with every ``{name}`` filled from the figure's CSV under ``root`` (``facts``): a note never
        states by hand a number its outputs hold; with no CSV (or one without the figure's columns), each
        reads "?"."""
        if self.facts is None:
            return self.note
        return facts.render(self.note, self.facts, root / f"{self.key}.csv")

    @property
    def modified(self) -> bool:
        """At the paper's scale with a setting changed (under ``figures/modified``), not below it."""
        return self.key.startswith(MODIFIED_FOLDER + "/")

    @property
    def knobs(self) -> tuple[str, ...]:
        """The knobs its command changes from the paper profile (its ``--set`` names)."""
        words = shlex.split(self.command)
        names = (word.split("=", 1)[0] for flag, word in zip(words, words[1:]) if flag == "--set")
        return tuple(name for name in names if name not in NOT_KNOBS)


# STEM's CIFAR-10 Figures 2-4 at the scale this machine ran in one session with a GPU-less, shared 2-core CPU:
# ≈ 12 CPU-min a figure (3 runs of 10 rounds; BENCHMARKS.md's CPU seconds of a round).
_STEM_CIFAR_SCALE = (
    "seeds 0 and 1 (the paper profile: 3), 10 of 100 rounds (≈ 9-10 local epochs), evaluated every round, rates "
    "tuned on seed 0 by the final training loss over grids far narrower than the paper profile's (34 STEM pairs, 6 "
    "rates): STEM (κ̄, c) ∈ {(0.05, 570), (0.1, 150), (0.2, 35), (0.4, 9)}, κ̄ stepped along a first-epoch momentum "
    "weight a = c·η² ≈ 0.9 as in Figure 1 measured (PROPOSED; c = 570 and 9 lie outside the spec's 1-200), "
    "FedAvg and SCAFFOLD η ∈ {0.02, 0.05, 0.1, 0.2} (one grid for all three figures, so that Figure 3's "
    "comparison reuses Figure 2's runs); otherwise the paper profile (K = 100, LeNet-5, the figure's (b, I)); on "
    "the lossy JPEG copy of CIFAR-10")
_STEM_CIFAR_KNOBS = ("--set data_source=stand-in --set num_rounds=10 --set evals=10 "
                     "--set 'stem_pairs=[[0.05,570],[0.1,150],[0.2,35],[0.4,9]]' "
                     "--set 'client_lr=[0.02,0.05,0.1,0.2]' --set 'seeds=[0,1]' --set workers=2 "
                     "--set out_dir=figures/cpu_scale")

# What the CPU-scale CIFAR-10 runs show beyond their claims (observations, not verdicts).
_STEM_CIFAR_NOTES = {
    "fig2": "Tuned on seed 0 by the final training loss: FedAvg {tuning_fedavg}; SCAFFOLD {tuning_scaffold}; "
            "STEM {tuning_stem}. The choices (FedAvg {chosen_fedavg}, SCAFFOLD {chosen_scaffold}, STEM "
            "{chosen_stem}, a ≈ {a_stem}) lie inside their grids. The three end close and STEM is not ahead: final "
            "training loss (seeds 0 / 1) STEM {final_stem}, FedAvg {final_fedavg}, SCAFFOLD {final_scaffold} "
            "(STEM against FedAvg: {loss_lag}), test accuracy STEM {acc_stem} %, FedAvg {acc_fedavg} % ({acc_lag} "
            "points behind); STEM's warm-up round (its initial batch B = b·I) starts it one round later. Diverged "
            "candidates stop early; 10 rounds cannot say how the tuned ordering ends at 100.",
    "fig3": "Large batches (b = 64, I = 7) want the largest steps, as the spec expects: tuned on seed 0, FedAvg "
            "{tuning_fedavg}; SCAFFOLD {tuning_scaffold}; STEM {tuning_stem}; every choice is its grid's largest step "
            "(FedAvg {chosen_fedavg}, SCAFFOLD {chosen_scaffold}, STEM {chosen_stem}), so a wider grid may do "
            "better still. With them STEM is level with FedAvg after 10 rounds (final training loss {final_stem} vs "
            "{final_fedavg}, seeds 0 / 1: {loss_lag}; test accuracy {acc_stem} % vs {acc_fedavg} %), inside "
            "neither margin, after a spike at {spike_round} (training loss up to {spike_loss}, test accuracy "
            "down {spike_drop} points, seeds 0 / 1), the sign of a step near its limit, so the step range decides "
            "this comparison. All three are behind Figure 2 (seed-mean "
            "test accuracies {acc_range_3} against Figure 2's {acc_range_2}), so 'Figures 2 and 3 end similar' "
            "fails on accuracy at this scale; Figure 3 reads 8 % fewer samples a round (64 · 7 against 8 · 61) and "
            "10 rounds is early.",
    "fig4": "At high heterogeneity STEM trains only at the smallest step: tuned on seed 0, STEM {tuning_stem}; "
            "FedAvg {tuning_fedavg}; SCAFFOLD {tuning_scaffold}. With {chosen_stem} (a ≈ {a_stem}) STEM ends behind "
            "FedAvg ({chosen_fedavg}) by {loss_lag} in training loss ({final_stem} vs {final_fedavg}, seeds 0 / 1) "
            "and {acc_lag} points in test accuracy ({acc_stem} % vs {acc_fedavg} %). STEM's choice is its grid's "
            "smallest κ̄: a smaller step may do better, which the paper profile's 34 pairs (on a GPU) would show.",
}

REDUCED: tuple[Reduced, ...] = (
    Reduced("cpu_scale/fedprox2020/fig2", "FedProx Figures 2 and 6, Sent140 panel (E ∈ {1, 20, 50}, μ = 0)",
            "200 of the final code's 800 rounds, evaluated every 10th round; otherwise its settings (η 0.3, K = 10, "
            "b = 10, 2 seeds) on our Sent140 (LEAF test split re-split per user, frozen random embedding)",
            "python -m replicate figures fedprox2020/fig2 --profile paper --set data_source=stand-in "
            "--set 'datasets=[\"sent140\"]' --set rounds=200 --set out_dir=figures/cpu_scale",
            "Our devices hold ≈ 4 training tweets each (the paper's: 53), so E = 20-50 epochs of b = 10 overfit each "
            "device: the training loss jumps from {start} to {jump} in the first 10 rounds and is still above it at "
            "round 200 (E = 20: {loss_20}, E = 50: {loss_50}; mean of 2 seeds), while E = 1 barely moves ({loss_1}) "
            "and ends at the test accuracy of predicting the majority class ({acc_1}). By test accuracy E = 20 / 50 do "
            "learn: {acc_20} / {acc_50} at round 200, so larger E is faster in accuracy and slower in loss at this "
            "scale. These runs are chaotic: one float32 rounding apart grows to another seed's curve within 10 "
            "rounds.", facts=reduced_facts.fedprox_fig2),
    Reduced("cpu_scale/fedprox2020/fig3", "FedProx Figures 3 and 7, Sent140 panel (E = 50, μ = 0 vs the best μ)",
            "200 of 800 rounds, evaluated every 10th round; otherwise as Figure 2's CPU-scale panel; the μ grid "
            "{0.001, 0.01, 0.1, 0.5, 1} on seed 0, the best μ on seed 1",
            "python -m replicate figures fedprox2020/fig3 --profile paper --set data_source=stand-in "
            "--set 'datasets=[\"sent140\"]' --set rounds=200 --set out_dir=figures/cpu_scale",
            "The grid's final training losses (seed 0, mean of the last 2 evaluations: {grid}) rise with μ: the "
            "best μ > 0 is μ = {best} (flagged where it is the grid's smallest: the trend points to μ = 0), and it "
            "ends against μ = 0 at {versus}. μ ≥ 0.5 ends below the majority-class accuracy ({large_acc} vs 0.606). "
            "So μ does not help here, which is what the draft's §5.3 says of Sent140 (\"on Sent140, μ does not help "
            "speed up convergence\"; μ stabilises \"the four datasets except Sent140\"). But the claim also asks "
            "μ = 0 to train (its training loss to end below its first evaluation), and on the test seed "
            "{test_seed} it does not ({zero_first} at the first evaluation, {zero_last} over the last two; ≈ 4 "
            "tweets a device overfit at E = 50), so the claim fails at this scale. These Sent140 runs are chaotic "
            "(one float32 rounding apart grows to another seed's curve within 10 rounds), so which small μ ends "
            "lowest moves between recomputations (docs/CHANGELOG.md). With ≈ 4 tweets a device (the final paper's "
            "53) local overfitting, not client drift, may dominate here.", facts=reduced_facts.fedprox_fig3),
    Reduced("cpu_scale/fedprox2020/fig4", "FedProx Figure 4, Sent140 panel (dissimilarity of the Figure 3 runs)",
            "the CPU-scale Figure 3 runs (200 of 800 rounds, dissimilarity every 10th round)",
            "python -m replicate figures fedprox2020/fig4 --profile paper --set data_source=stand-in "
            "--set 'datasets=[\"sent140\"]' --set rounds=200 --set out_dir=figures/cpu_scale",
            "The Figure 3 runs. The dissimilarity does not fall with μ on this data (mean over rounds, seed 0: "
            "{dissimilarity}), opposite to the draft's Figure 4, yet it still tracks the runs' final training loss "
            "over the grid and their loss over rounds (the Spearman correlations in the claims below), as the "
            "paper's §5.4 reads it.", facts=reduced_facts.fedprox_fig4),
    Reduced("cpu_scale/fedprox2020/stragglers", "FedProx final paper, Figure 1, Sent140 column (0 / 50 / 90 % "
            "stragglers)",
            "200 of 800 rounds, evaluated every 10th round; otherwise the final code's Sent140 settings (E = 20, "
            "K = 10, b = 10, η 0.3, μ = 0.01 for FedProx μ > 0, 2 seeds) on our Sent140, as Figures 2-4's panels",
            "python -m replicate figures fedprox2020/stragglers --profile paper --set data_source=stand-in "
            "--set 'datasets=[\"sent140\"]' --set rounds=200 --set mu=0.01 --set out_dir=figures/cpu_scale",
            "FedAvg, which drops the stragglers, degrades (final training loss {fedavg_none} without stragglers, "
            "{fedavg_90} at 90 %, and its final test accuracy there {fedavg_acc_90}, against the majority-class "
            "share 0.606), while keeping their partial work holds the loss at {partial_90} (μ = 0) and {prox_90} "
            "(μ = 0.01; seeds' mean [min, max]). The test-accuracy gain over FedAvg at 90 % is {gain} points for "
            "μ = 0.01 and {gain_alone} for μ = 0 (the paper: +22 points averaged over five datasets; this column is "
            "not in the paper-scale average): the gain here comes from keeping the partial work, and whether μ = 0.01 "
            "adds to it is the last claim's question.", facts=reduced_facts.stragglers),
    Reduced("cpu_scale/charles2021/fig6", "Charles & Konečný Figure 6 (= 11), FEMNIST: no momentum vs Nesterov vs "
            "heavy-ball, and α, each with its rates tuned",
            "100 of 1,500 rounds (evaluated every 8th), γ = 0.01 only, η ∈ {0.00316, 0.01, 0.0316, 0.1} (the paper: "
            "7 γ × 9 η), α ∈ {0, 1}, tuned on seed 0 by the test accuracy of the last 40 rounds (6 evaluations), "
            "seeds 0 and 1; otherwise the paper profile (all 105 writers, M = 10, B = 20, one epoch, β = 0.9)",
            "python -m replicate figures charles2021/fig6 --profile paper --set data_source=stand-in "
            "--set 'client_lrs=[0.01]' --set 'server_lrs=[0.003162, 0.01, 0.03162, 0.1]' --set 'alphas=[0, 1]' "
            "--set rounds=100 --set eval_every=8 --set tail_rounds=40 --set 'seeds=[0, 1]' "
            "--set out_dir=figures/cpu_scale",
            "The paper's picture, at this scale (tuned η: no momentum {eta_plain}, heavy-ball {eta_heavy}, "
            "Nesterov {eta_nesterov}, α = 1 {eta_alpha}; {edges}): server momentum "
            "is far ahead of plain GD (test accuracy at round 100, seeds 0 / 1: heavy-ball {acc_heavy}, Nesterov "
            "{acc_nesterov}, no momentum {acc_plain}; training loss {loss_heavy}, {loss_nesterov}, {loss_plain}), and "
            "α = 1 lies on α = 0: its test accuracy over the last 40 rounds is {alpha_gap} below (the claim's "
            "margin: 0.02). At η = {top_eta} the momentum variants fall to chance (tail accuracy {top_heavy} "
            "heavy-ball, {top_nesterov} Nesterov) and plain GD reaches {top_plain} (α = 1: {top_alpha}).",
            facts=reduced_facts.charles_fig6),
    Reduced("cpu_scale/charles2021/fig12", "Charles & Konečný Figure 12, FEMNIST panel (training loss for "
            "several client rates γ at a fixed server rate η)",
            "100 of 1,500 rounds (evaluated every 8th), γ ∈ {0.01, 0.0316, 0.1} of the 7-value grid, η = 0.01, "
            "seeds 0 and 1, early window rounds ≤ 20 and final window the last 40 rounds (6 evaluations); "
            "otherwise the paper profile (all 105 writers of the local copy, M = 10, B = 20, one epoch, Reddi et "
            "al.'s CNN)",
            "python -m replicate figures charles2021/fig12 --profile paper --set data_source=stand-in "
            "--set 'datasets=[\"femnist\"]' --set 'client_lrs=[0.01, 0.0316, 0.1]' --set rounds=100 "
            "--set eval_every=8 --set early_rounds=20 --set tail_rounds=40 --set 'seeds=[0, 1]' "
            "--set out_dir=figures/cpu_scale",
            "At η = 0.01 the smallest γ is ahead throughout: γ = 0.01 ends at a training loss of {final0} "
            "(seeds 0 / 1, mean of the last 40 rounds) and {acc0} test accuracy at round 100 (seed mean), γ = 0.0316 "
            "at {final1} ({acc1}) and γ = 0.1 at {final2} ({acc2}), whose early loss ({early2}; rounds 1-20) is also "
            "the highest. So the smaller γ reaches the lower loss, as the paper says, but it is also the faster one "
            "early, which the paper gives to the larger γ, and its lead over γ = 0.1 ({lead} on seeds 0 and 1) must "
            "reach the claims' 5 % on every seed (\"γ changes the loss reached\" asks the same of the highest over "
            "the lowest). At 100 rounds every run is still leaving the initial plateau (ln 62 = 4.13); the paper's "
            "curves span 1,500 rounds, and its fixed η is masked: at another η (or with η tuned, Figure 13) the order "
            "may differ.", facts=reduced_facts.charles_fig12),
    Reduced("cpu_scale/charles2021/fig13", "Charles & Konečný Figure 13, FEMNIST panel (as Figure 12, with η "
            "tuned per γ)",
            "as the CPU-scale Figure 12, with η ∈ {0.01, 0.0316, 0.1, 0.316} tuned per γ on seed 0 by the training "
            "loss of the last 40 rounds (6 evaluations; the paper: 9 values of η)",
            "python -m replicate figures charles2021/fig13 --profile paper --set data_source=stand-in "
            "--set 'datasets=[\"femnist\"]' "
            "--set 'client_lrs=[0.01, 0.0316, 0.1]' --set 'server_lrs=[0.01, 0.03162, 0.1, 0.3162]' --set rounds=100 "
            "--set eval_every=8 --set early_rounds=20 --set tail_rounds=40 --set 'seeds=[0, 1]' "
            "--set out_dir=figures/cpu_scale",
            "With η tuned per γ (γ = 0.01 picks η = {eta0}, γ = 0.0316 "
            "η = {eta1}, γ = 0.1 η = {eta2}; {edges}), the largest γ is far "
            "ahead at 100 rounds: training loss over the last 40 rounds {final2} (seeds 0 / 1) for γ = 0.1 against "
            "{final1} (γ = 0.0316) and {final0} (γ = 0.01); test accuracy at round 100: {acc2}, {acc1}, {acc0} (seed "
            "means). The claims test seed 1 alone (seed 0 chose the rates). So 'larger γ faster early' and 'γ changes "
            "the loss reached' hold, and 'a smaller γ eventually ends lower' fails here: the paper's curves run 1,500 "
            "rounds, and at 100 the runs are still descending, so this says only that the trade-off, if it comes, "
            "comes later. A tuned η at a grid's edge is flagged because a narrower grid tried earlier held γ = 0.1 "
            "below its optimal η and showed the opposite order (docs/CHANGELOG.md). Its seed-0 tuning "
            "grid is published with its curves (tests/test_halving.py replays them).",
            facts=reduced_facts.charles_fig13),
    Reduced("cpu_scale/khanduri2021/fig5", "STEM Figure 5 (MNIST, high heterogeneity: STEM vs FedAvg vs SCAFFOLD "
            "against the samples per worker, I = 10 and 100)",
            "3,200 of 30,000 samples per worker (≈ 6 local epochs), 20 evaluations per run, seeds 0 and 1 (the "
            "paper profile: 3), rates tuned on seed 0 over grids narrower than the paper profile's: STEM κ̄ ∈ "
            "{0.05, 0.1, 0.2, 0.5} × c ∈ {6, 35, 100, 150} where the first-epoch momentum weight a = c·η² < 1 "
            "(11 pairs; c = 6 and 35 put a near 0.9 for κ̄ = 0.5 and 0.2), FedAvg and SCAFFOLD η ∈ {0.01, 0.02, "
            "0.05, 0.1, 0.2}; otherwise the paper profile (K = 100, b = 8, LeNet)",
            "python -m replicate figures khanduri2021/fig5 --profile paper --set samples_per_worker=3200 "
            "--set 'stem_lr=[0.05,0.1,0.2,0.5]' --set 'stem_c=[6,35,100,150]' "
            "--set 'client_lr=[0.01,0.02,0.05,0.1,0.2]' --set evals=20 --set 'seeds=[0,1]' --set workers=1 "
            "--set out_dir=figures/cpu_scale",
            "The large I needs more samples per worker to reach 90 % test accuracy for all three (I = 10 against "
            "I = 100, over the seeds: FedAvg {target_fedavg_10} vs {target_fedavg_100}; SCAFFOLD {target_scaffold_10} "
            "vs {target_scaffold_100}; STEM {target_stem_10} vs {target_stem_100}; the I = 100 runs are evaluated "
            "once a round, every b·I = 800 samples). STEM is not the best here: its final training loss (seed mean) "
            "is {loss_stem_10} at I = 10 against FedAvg's {loss_fedavg_10} and SCAFFOLD's {loss_scaffold_10}, and "
            "{loss_stem_100} at I = 100 against {loss_fedavg_100} and {loss_scaffold_100}. Of the {pairs} (κ̄, c) "
            "pairs these STEM settings finished their tuning run (a = c·η_1², the first-epoch momentum weight): at "
            "I = 10 {trained_10}; at I = 100 {trained_100}; every other pair diverged, even with a near 0.9 at the "
            "larger steps. c = 150 is flagged at its grid's edge, but a larger c at κ̄ = 0.1 makes a ≥ 1 (no "
            "momentum left: outside the spec's range), so only c ∈ (150, 159) remains unexplored. FedAvg's "
            "η = {chosen_fedavg_10} / {chosen_fedavg_100} and SCAFFOLD's {chosen_scaffold_10} / {chosen_scaffold_100} "
            "(I = 10 / 100) are their tuned rates. Its initial batch B = b·I costs STEM 800 samples before the first "
            "step at I = 100. The paper's own (κ̄, c, w) are lost; a wider grid at the paper's budget (the paper "
            "profile, on a GPU) may change the STEM ordering. The engine stops training a run once its model is all "
            "NaN, so the diverged candidates cost seconds; every tuning run is published with its curve "
            "(tests/test_halving.py replays them).", facts=reduced_facts.stem_fig5),
    *(Reduced(f"cpu_scale/khanduri2021/{figure}", what, _STEM_CIFAR_SCALE,
              "python -m replicate figures khanduri2021/" + figure + " --profile paper " + _STEM_CIFAR_KNOBS, note,
              facts=reduced_facts.stem_cifar)
      for figure, what, note in (
          ("fig2", "STEM Figure 2 (CIFAR-10, moderate heterogeneity, b = 8, I = 61)", _STEM_CIFAR_NOTES["fig2"]),
          ("fig3", "STEM Figure 3 (CIFAR-10, moderate heterogeneity, b = 64, I = 7; against Figure 2)",
           _STEM_CIFAR_NOTES["fig3"]),
          ("fig4", "STEM Figure 4 (CIFAR-10, high heterogeneity, b = 8, I = 61)", _STEM_CIFAR_NOTES["fig4"]))),
    # STEM's second grid (spec §6.7, docs/stem_grid.md): the same run as the record above but for STEM's momentum
    # axis, so that the two grids' outcomes stand side by side
    Reduced("cpu_scale/second_grid/khanduri2021/fig5", "STEM Figure 5 under the second grid (κ̄ × the first-epoch "
            "momentum weight a₀; spec §6.7)",
            "as STEM Figure 5 at CPU scale above (3,200 of 30,000 samples per worker, 20 evaluations, seeds 0 and 1, "
            "rates tuned on seed 0, FedAvg and SCAFFOLD η ∈ {0.01, 0.02, 0.05, 0.1, 0.2}), but STEM's grid is the "
            "second: κ̄ ∈ {0.05, 0.1, 0.2, 0.5} × a₀ ∈ {0.1, 0.3, 0.5, 0.9}, c = a₀/η_1² = 2^(2/3)·a₀/κ̄² (16 pairs, "
            "PROPOSED, stated before its runs)",
            "python -m replicate figures khanduri2021/fig5 --profile paper --set samples_per_worker=3200 "
            "--set 'stem_lr=[0.05,0.1,0.2,0.5]' --set stem_momentum=a0 "
            "--set 'client_lr=[0.01,0.02,0.05,0.1,0.2]' --set evals=20 --set 'seeds=[0,1]' --set workers=2 "
            "--set out_dir=figures/cpu_scale/second_grid"),
    Reduced("modified/second_grid/khanduri2021/fig1_measured", "STEM Figure 1 measured under the second grid (κ̄ × "
            "the first-epoch momentum weight a₀; spec §6.7)",
            "the paper's: the paper profile (its nine (b, I) pairs, budget, target and seeds), but STEM's grid is the "
            "second, κ̄ ∈ {0.02, 0.03, 0.05, 0.1, 0.2, 0.4} × a₀ ∈ {0.1, 0.3, 0.5, 0.9}, c = a₀/η_1² (24 settings per "
            "pair against the first grid's 6; PROPOSED, stated in spec §6.7 before any of its runs)",
            "python -m replicate figures khanduri2021/fig1_measured --profile paper --set stem_momentum=a0 "
            "--set workers=2 --set out_dir=figures/modified/second_grid"),
    Reduced("modified/second_grid/khanduri2021/fig5",
            "STEM Figure 5 under the second grid, at the paper's scale (spec §6.7)",
            "the paper's: the paper profile (30,000 samples per worker, its seeds, FedAvg's and SCAFFOLD's grids), but "
            "STEM's grid is the second, κ̄ × a₀ ∈ {0.1, 0.3, 0.5, 0.9}, c = a₀/η_1² (PROPOSED, stated in spec §6.7 "
            "before any of its runs); computed on a GPU, its runs read from the ledger",
            "REPLICATE_DEVICE=cuda python -m replicate figures khanduri2021/fig5 --profile paper "
            "--set stem_momentum=a0 --set out_dir=figures/modified/second_grid"),
)
