// The page's problem line: what went wrong, for a person watching (the automated session
// reads the same text from window.mpstream.failure).
export function showProblem(text) {
  const box = document.getElementById('problem');
  box.textContent = text;
  box.hidden = false;
}
