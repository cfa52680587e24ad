// Upload page: drag and drop onto the file field. Dropped files become the <input type=file>'s
// own files, so the plain form submission carries them; without this script the input still
// works (choose several files) and nothing else on the page depends on it.
(function () {
  "use strict";
  const form = document.querySelector("[data-upload-form]");
  if (!form) return;
  const zone = form.querySelector("[data-dropzone]");
  const input = zone.querySelector("input[type=file]");
  const list = zone.querySelector("[data-file-list]");
  const status = form.querySelector("[data-upload-status]");
  const button = form.querySelector("[data-upload-button]");

  function humanSize(bytes) {
    if (bytes >= 1024 * 1024) return (bytes / (1024 * 1024)).toFixed(1) + " MB";
    if (bytes >= 1024) return (bytes / 1024).toFixed(1) + " KB";
    return bytes + " bytes";
  }

  function showSelection() {
    list.replaceChildren();
    for (const file of input.files) {
      const item = document.createElement("li");
      // textContent, never innerHTML: file names are untrusted.
      item.textContent = file.name + " (" + humanSize(file.size) + ")";
      list.append(item);
    }
  }

  function addFiles(files) {
    // Dropping adds to what is already chosen, so files can come from several folders.
    const transfer = new DataTransfer();
    for (const file of input.files) transfer.items.add(file);
    for (const file of files) transfer.items.add(file);
    input.files = transfer.files;
    showSelection();
  }

  for (const type of ["dragenter", "dragover"]) {
    zone.addEventListener(type, (event) => {
      event.preventDefault();
      zone.classList.add("dragging");
    });
  }
  for (const type of ["dragleave", "drop"]) {
    zone.addEventListener(type, () => zone.classList.remove("dragging"));
  }
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    if (event.dataTransfer && event.dataTransfer.files.length) addFiles(event.dataTransfer.files);
  });
  input.addEventListener("change", showSelection);
  form.addEventListener("submit", () => {
    if (!input.files.length) return;
    // Large uploads take a while to send; say so instead of leaving a dead button.
    button.disabled = true;
    status.textContent = "Uploading " + input.files.length + " file(s)…";
  });
})();
