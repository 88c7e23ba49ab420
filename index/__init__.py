"""The bundled corpus (the .txt paper lists beside this one), shipped inside the package as `assistant.corpus_data`."""
