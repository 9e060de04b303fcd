package crashpoint

// StepName and ShorthandName expose the runtime name parsing to the tests.
var (
	StepName      = stepName
	ShorthandName = shorthandName
)
