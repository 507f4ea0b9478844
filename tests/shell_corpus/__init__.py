"""The shell corpus: scripts clients send to a sandbox, with what GNU bash answered for each
(see :mod:`tests.shell_corpus.corpus`)."""
