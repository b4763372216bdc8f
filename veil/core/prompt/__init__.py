"""What is sent to the model, read top down: ``context`` (``build_prompt`` runs the steps in
order), ``assemble`` (the parts: system message, summary, kept messages with
stubs and pointers, notes, pairing), ``fit`` (the ``fit_prompt`` and ``elide_messages`` hooks and
the eviction rounds), ``squeeze`` (the last resort), ``state`` (what stays put between prompts);
full compaction (``compaction``, ``compaction_cut``); the columnar item views (``items``) and
rule-based tags (``tags``) scorers read. Repeated-line elision is default plugin ``veil.elision``.
"""
