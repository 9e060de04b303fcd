module github.com/cutline/cutline/cutlinetest/linearize

go 1.26.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/cutline/cutline v0.0.0
	go.uber.org/goleak v1.3.0
)

require golang.org/x/sync v0.25.0 // indirect

replace github.com/cutline/cutline => ../..
