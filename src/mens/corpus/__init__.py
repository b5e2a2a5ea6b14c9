"""The corpus pipeline: extract → pairs → validate → mix → eval (+ stats, generate-data).

Each stage is a plain function (see each module's docstring) that the CLI and `mens pipeline`
call; every stage writes its output atomically and a JSON report beside it."""
