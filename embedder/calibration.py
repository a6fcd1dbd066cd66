"""Calibration texts for the int8 build: what the model sees in service, in many scripts.

The builder runs these through the fp32 graph to find each FFN down-projection's
per-channel activation range (SmoothQuant). They are deliberately not the test
suite's fidelity texts, so the tests measure text the calibration never saw.
Short chat turns and queries, degenerate inputs (one character repeated,
punctuation runs, digits, emoji) whose activations have the widest outliers, and
passages long enough to fill the 480-token chunk window.
"""

from __future__ import annotations

__all__ = ["calibration_texts"]

_SENTENCES = (
    "Can you check why my last invoice was charged twice this month?",
    "Please forward the meeting notes to everyone on the project before Friday.",
    "The patient reported mild headaches after switching to the new medication.",
    "Our API returns a 429 status when the client exceeds the rate limit.",
    "I would like to change the delivery address for order 88213.",
    "Bitte senden Sie mir die Rechnung noch einmal als PDF zu.",
    "Die Zugverbindung nach Hamburg fällt heute wegen Bauarbeiten aus.",
    "Le rendez-vous chez le médecin est déplacé à jeudi prochain, neuf heures.",
    "Nous avons reçu votre réclamation et un conseiller vous rappellera demain.",
    "El pedido llegó incompleto: faltan dos cajas de tornillos.",
    "¿Puedo pagar la factura en tres cuotas sin intereses?",
    "O voo para Lisboa foi cancelado por causa do mau tempo.",
    "La riunione con il fornitore è stata spostata a lunedì pomeriggio.",
    "De levering is vertraagd door een staking in de haven van Rotterdam.",
    "Zamówienie zostało wysłane wczoraj i powinno dotrzeć w ciągu dwóch dni.",
    "Sipariş numaranızı paylaşır mısınız, kargo durumunu kontrol edeyim.",
    "Мы продлили подписку ещё на год, но счёт так и не пришёл.",
    "Оператор пообещал перезвонить, но прошло уже три дня.",
    "Замовлення надійшло пошкодженим, прошу повернути кошти.",
    "我想查询一下上个月的话费账单，为什么比平时高这么多？",
    "会议改到明天下午三点，请大家准时参加。",
    "注文した商品がまだ届いていません。追跡番号を教えてください。",
    "明日の会議資料を今日中に共有していただけますか。",
    "배송이 너무 늦어지고 있어요. 언제 도착하나요?",
    "비밀번호를 잊어버려서 계정에 로그인할 수 없습니다.",
    "ลูกค้าต้องการเปลี่ยนวันจัดส่งสินค้าเป็นสัปดาห์หน้า",
    "Tôi muốn hủy đơn hàng vì giao hàng quá chậm.",
    "Saya ingin mengembalikan barang yang rusak saat pengiriman.",
    "هل يمكنني تغيير موعد التسليم إلى يوم الأحد؟",
    "تم إلغاء الرحلة بسبب سوء الأحوال الجوية.",
    "ההזמנה שלי עדיין לא הגיעה, אפשר לבדוק מה קרה?",
    "मेरा रिफंड अभी तक मेरे खाते में नहीं आया है।",
    "আমার অর্ডারটি কবে পৌঁছাবে জানাবেন কি?",
    "Η παραγγελία μου καθυστερεί ήδη δύο εβδομάδες.",
    "Objednávka dorazila poškozená, prosím o výměnu.",
    "Rendelésem még mindig nem érkezett meg, kérem ellenőrizzék.",
    "Tilaukseni on myöhässä jo viikon, mitä on tapahtunut?",
    "Min beställning har inte kommit fram, kan ni kolla spårningen?",
)

_ODD = (
    "a" * 200,
    "z" * 40,
    "ha" * 120,
    "." * 80,
    "!!!???!!!" * 10,
    "-" * 120,
    "0123456789" * 20,
    "ok",
    "?",
    "yes yes yes yes yes yes yes yes yes yes yes yes",
    "ALL CAPS SHOUTING ABOUT A LATE REFUND AGAIN",
    "https://example.com/orders/88213?ref=mail&utm_source=newsletter",
    "user@example.org, +1 (555) 010-9999, SKU AB-1234-XYZ",
    "def handler(event): return {'status': 200, 'body': json.dumps(event)}",
    "SELECT id, total FROM invoices WHERE paid = false ORDER BY due_date;",
    "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘😗",
    "🚚📦✅❌⏰ 2025-12-24 18:30 UTC+01:00",
    "ＡＢＣ ｱｲｳｴｵ ℌ𝔢𝔩𝔩𝔬 ⅓ ⅔ № ©®",
    "\t\n  \r\n",
)


def calibration_texts() -> list[str]:
    """Short texts, degenerate ones, and a few long multilingual passages (over 480 tokens)."""
    passages = [" ".join(_SENTENCES[i::3] * 6) for i in range(3)]
    return [*_SENTENCES, *_ODD, *passages]
