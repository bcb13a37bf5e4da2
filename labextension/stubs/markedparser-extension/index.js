// Stand-in for @jupyterlab/markedparser-extension (see README.md beside this file). Nothing in the
// sidebar's build or tests loads it; if something ever does, say so instead of failing obscurely.
throw new Error(
  'labextension/stubs/markedparser-extension was loaded: something now needs the real ' +
    '@jupyterlab/markedparser-extension; drop its entry from package.json "resolutions".'
);
