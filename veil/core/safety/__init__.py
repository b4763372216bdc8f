"""What keeps a stranger's repository from steering veil: secret redaction (``redaction``,
``secret_formats``), tool-call permissions (``permissions``), what project files may configure
(``trust``, ``prompt_trust``), containment of paths under ``.veil/`` (``paths``) and the process
groups of commands tools run (``processes``).
"""
