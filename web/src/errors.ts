/** The error values a cell can hold, and reading one typed as text. */
/**
 * The spreadsheet errors a cell can hold, with what each means (the server's list,
 * functions/sheet/src/value.rs). `#CIRC!`, `#ERROR!` and `#N/IMPL` are what the formula engine
 * gives a cycle, a formula it cannot read and a function it lacks.
 */
export const ERRORS: Readonly<Record<string, string>> = {
  '#NULL!': 'ranges that do not intersect',
  '#DIV/0!': 'division by zero',
  '#VALUE!': 'a value of the wrong type',
  '#REF!': 'a reference to a cell that is gone',
  '#NAME?': 'a name or function the engine does not know',
  '#NUM!': 'a number out of range',
  '#N/A': 'a value that is not available',
  '#GETTING_DATA': 'data still being read',
  '#SPILL!': 'an array result that has no room',
  '#CALC!': 'a calculation the engine cannot do',
  '#CIRC!': 'a circular reference: the formula reads its own value',
  '#ERROR!': 'a formula that cannot be read',
  '#N/IMPL': 'a function the engine does not implement',
};

/** The error value for a text such as `#div/0!` (as spreadsheets accept it), or undefined. */
export function errorValue(text: string): { error: string } | undefined {
  const code = text.trim().toUpperCase();
  return Object.hasOwn(ERRORS, code) ? { error: code } : undefined;
}
