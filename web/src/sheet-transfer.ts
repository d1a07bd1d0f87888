/**
 * Import and export of one sheet. Import replaces the sheet with a CSV or XLSX file: a presigned
 * upload with a progress bar, then the commit, then a wait until the live view has it. Export
 * downloads the view shown as CSV, read by range at its sequence; texts that would run as
 * formulas get a leading `'` unless the button is Alt-clicked. Download XLSX asks the server for
 * the version shown as a workbook and downloads it from S3.
 */
import { ApiError, type CellsAnswer, call, type Extent, putWithProgress, type Upload } from './api';
import { csvValue } from './csv';
import { colName, plain, type Value } from './model';
import type { SheetContext } from './sheet-context';
import { el } from './ui';

/** The import: the file input's change. `exitHistory` goes back to the live sheet first. */
/**
 * `group`: this page's Replicache client group, named in the commit so the import is a step of
 * this person's undo stack (Ctrl+Z takes it back while nothing came after it).
 */
export function importAction(ctx: SheetContext, exitHistory: () => void, group: () => Promise<string>): void {
  const { ui, messages, api } = ctx;
  const { fileInput, progress, progressText } = ui;
  fileInput.onchange = async () => {
    const file = fileInput.files?.[0];
    fileInput.value = '';
    if (!file) return;
    const ext = file.name.toLowerCase().split('.').pop();
    if (ext !== 'csv' && ext !== 'xlsx') {
      messages.error(`File rejected: “${file.name}” is not a .csv or .xlsx file.`);
      return;
    }
    if (ctx.historyAt !== undefined) exitHistory();
    const contentType =
      ext === 'csv' ? 'text/csv' : 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet';
    progress.hidden = false;
    progress.value = 0;
    try {
      progressText.textContent = `Uploading ${file.name}…`;
      const upload = await call<Upload>('POST', `${api}/uploads`, { type: 'import', size: file.size, contentType });
      await putWithProgress(upload, file, (sent, total) => {
        progress.value = total ? sent / total : 0;
        progressText.textContent = `Uploading ${file.name}: ${Math.round((100 * sent) / Math.max(total, 1))}%`;
      });
      progress.removeAttribute('value');
      progressText.textContent = 'Checking the file and committing…';
      const done = await call<{ seq: number }>('POST', `${api}/uploads/${upload.uploadId}/commit`, {
        clientGroupId: await group(),
      });
      progressText.textContent = 'Imported; loading…';
      await until(() => (ctx.live?.seq ?? 0) > done.seq);
      progressText.textContent = `Imported ${file.name}.`;
      messages.info(`Imported ${file.name} (version ${done.seq}).`);
    } catch (e) {
      progressText.textContent = '';
      messages.error(e instanceof ApiError ? e.message : `The import failed: ${String(e)}`);
    } finally {
      progress.hidden = true;
    }
  };
}

/** The export: the Export CSV button's click. */
export function exportAction(ctx: SheetContext): void {
  const { ui, messages, api } = ctx;
  ui.exportBtn.onclick = async (event: MouseEvent) => {
    if (!ctx.shown) return;
    const seq = ctx.shown.seq;
    // Alt-click: raw texts, as `sheetlog export --raw` (docs/web.md, "Export").
    const raw = event.altKey;
    try {
      const ext = await call<Extent>('GET', `${api}/extent?at=${seq}`);
      const parts: string[] = [];
      const per = Math.max(1, Math.min(1000, Math.floor(100_000 / Math.max(ext.columns, 1))));
      for (let r = 0; r < ext.rows; r += per) {
        ui.progressText.textContent = `Exporting rows ${r + 1}–${Math.min(ext.rows, r + per)} of ${ext.rows}…`;
        const range = `A${r + 1}:${colName(ext.columns - 1)}${Math.min(ext.rows, r + per)}`;
        const a = await call<CellsAnswer>('GET', `${api}/cells?range=${range}&at=${seq}`);
        // Values as a reader sees them: computed, when the server computes formulas; else texts
        // without their input-form quote (a formula's text then goes as a text).
        const rows = a.formulas ? (a.values as Value[][]) : (a.values as Value[][]).map((r) => r.map(plain));
        for (const row of rows) {
          let end = row.length;
          while (end > 0 && row[end - 1] === null) end--;
          parts.push(
            `${row
              .slice(0, end)
              .map((v) => csvValue(v, raw))
              .join(',')}\r\n`,
          );
        }
      }
      const a = el('a', {
        href: URL.createObjectURL(new Blob(parts, { type: 'text/csv' })),
        download: `sheet-${ctx.logId.slice(0, 8)}-v${seq}.csv`,
      });
      document.body.append(a);
      a.click();
      a.remove();
      ui.progressText.textContent = `Exported ${ext.rows} rows.`;
    } catch (e) {
      ui.progressText.textContent = '';
      messages.error(e instanceof ApiError ? e.message : `The export failed: ${String(e)}`);
    }
  };
}

/** What `GET /logs/{logId}/export` answers. */
interface ExportAnswer {
  seq: number;
  url: string;
  bytes: number;
}

/**
 * Download XLSX: the server writes the version on screen as a workbook into S3 and answers a
 * presigned URL, which the browser downloads (the URL names the file; it needs no token).
 */
export function xlsxAction(ctx: SheetContext): void {
  const { ui, messages, api } = ctx;
  ui.xlsxBtn.onclick = async () => {
    if (!ctx.shown) return;
    const seq = ctx.shown.seq;
    ui.xlsxBtn.disabled = true;
    ui.progressText.textContent = 'Writing the workbook…';
    try {
      const a = await call<ExportAnswer>('GET', `${api}/export?format=xlsx&at=${seq}`);
      const link = el('a', { href: a.url });
      document.body.append(link);
      link.click();
      link.remove();
      ui.progressText.textContent = `Downloaded version ${seq} (${Math.ceil(a.bytes / 1024)} KB).`;
    } catch (e) {
      ui.progressText.textContent = '';
      messages.error(e instanceof ApiError ? e.message : `The download failed: ${String(e)}`);
    } finally {
      ui.xlsxBtn.disabled = false;
    }
  };
}

/** Resolves once `f()` holds (checked every 100 ms), or fails after `timeoutMs`. */
function until(f: () => boolean, timeoutMs = 120_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      if (f()) resolve();
      else if (Date.now() - start > timeoutMs) reject(new Error('timed out waiting for the sheet to catch up'));
      else setTimeout(tick, 100);
    };
    tick();
  });
}
