"""Learning tasks from scratch: a small GPT (``model``), batches from the task samplers (``data``),
the papers' training protocol (``train``), mechanistic head scores (``scores``) and the report that
sets measured accuracy beside the published numbers and the checker's verdict (``report``).

Used by ``rasp learn`` and ``rasp report``.
"""
