package server

import (
	"embed"
	"io/fs"
	"net/http"
)

// console holds the web console: plain HTML, CSS and JavaScript, embedded
// in the binary (no CDN, no build step). The page draws /api/cluster,
// /api/topics, /api/groups and /api/transactions; it has no data of its
// own.
//
//go:embed console/index.html console/style.css console/app.js
var console embed.FS

// consoleHandler serves the console's files at /.
func consoleHandler() http.Handler {
	sub, err := fs.Sub(console, "console")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:")
		files.ServeHTTP(w, r)
	})
}
