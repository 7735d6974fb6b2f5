"""AutoACU's metrics (Yale-LILY/AutoACU, PyPI `autoacu==0.1.0`) and the metrics over human ACUs:

- `a2cu-r`, `a2cu-p`, `a2cu-f` (a2cu.py): a T5 generator writes the atomic content units
  (ACUs) of one text, a DeBERTa NLI classifier checks each against the other text; the score is
  the share of units found (recall: the reference's units in the summary; precision: the
  summary's in the reference; F1 of the two). `variant=head` is GitHub HEAD's generation
  (units de-duplicated, no `min_length`).
- `a3cu-r`, `a3cu-p`, `a3cu-f` (a3cu.py): A3CU, a BERT with a linear head on the first token,
  its raw output for (summary, reference) and (reference, summary).
- `semiautoacu` (evaluator.py): A2CU's classifier over human units from a units file
  (tasks.units.unit_files), as QAPyramid's SemiAutoACU ran it on RoSE's ACUs; rose.py turns
  RoSE records into such a file. Lite²Pyramid with ACUs is the `pyramid` evaluator over the
  same file.

models.py loads the three checkpoints (their kind checked, any device); evaluator.py holds the
registered evaluators and their options."""
